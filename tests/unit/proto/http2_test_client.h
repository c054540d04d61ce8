#pragma once
// A real HTTP/2 client for the tests: an nghttp2 client session over a loopback socket (cleartext
// with prior knowledge, or TLS with ALPN "h2"), driven by the test thread. Requests are submitted,
// then run_until() exchanges frames until a condition holds (poll with a timeout, no sleeps).
// Window control: with manual_windows, the client grants a stream more window only when the test
// calls open_window(id) (the connection window is always granted), so a test can play a client
// that reads one stream slowly.

#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cutline/proto/http1/http_message.h"
#include "net_test_util.h"

namespace cutline::proto::testing {

class Http2TestClient {
 public:
  struct Options {
    // SETTINGS_INITIAL_WINDOW_SIZE this client announces (its receive window per stream).
    uint32_t initial_window_bytes = 1 << 20;
    bool manual_windows = false;
    bool tls = false;          // TLS with ALPN "h2" (no verification: the tests check ALPN)
    bool send_preface = true;  // false: a test writes raw bytes itself
  };
  struct Response {
    int status = 0;
    HttpHeaders headers;
    std::string body;
    HttpHeaders trailers;
    bool ended = false;   // END_STREAM received
    bool closed = false;  // the stream closed (ended or reset)
    uint32_t error_code = 0;
  };

  Http2TestClient(uint16_t port, Options options) : options_(options) {
    fd_ = connect_raw(port);
    if (fd_ < 0) return;
    if (options_.tls) {
      ctx_ = SSL_CTX_new(TLS_client_method());
      SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
      static const unsigned char kAlpn[] = "\x02h2\x08http/1.1";
      SSL_CTX_set_alpn_protos(ctx_, kAlpn, sizeof(kAlpn) - 1);
      ssl_ = SSL_new(ctx_);
      SSL_set_fd(ssl_, fd_);
      timeval tv{5, 0};
      setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      if (SSL_connect(ssl_) != 1) {
        close();
        return;
      }
      const unsigned char* alpn = nullptr;
      unsigned alpn_len = 0;
      SSL_get0_alpn_selected(ssl_, &alpn, &alpn_len);
      alpn_.assign(reinterpret_cast<const char*>(alpn), alpn_len);
      if (X509* cert = SSL_get1_peer_certificate(ssl_)) {
        char cn[256] = {0};
        X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
        peer_cn_ = cn;
        X509_free(cert);
      }
    }
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_header_callback(cbs, &on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &on_close);
    nghttp2_option* opt = nullptr;
    nghttp2_option_new(&opt);
    if (options_.manual_windows) nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_session_client_new2(&session_, cbs, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    if (options_.send_preface) {
      const nghttp2_settings_entry iv[] = {
          {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, options_.initial_window_bytes}};
      nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, iv, 1);
      // The connection window never limits these tests.
      nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, (1 << 30));
    }
  }
  ~Http2TestClient() {
    if (session_ != nullptr) nghttp2_session_del(session_);
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    close();
  }
  Http2TestClient(const Http2TestClient&) = delete;
  Http2TestClient& operator=(const Http2TestClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Closes the socket (the session stays for inspection).
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  const std::string& alpn() const { return alpn_; }
  // The server certificate's CN (TLS).
  const std::string& peer_cn() const { return peer_cn_; }

  // Submits a request; returns its stream id (< 0 on error).
  int32_t submit(std::string_view method, std::string_view path, std::string body = {},
                 const HttpHeaders& headers = {}) {
    std::vector<std::pair<std::string, std::string>> fields = {{":method", std::string(method)},
                                                               {":scheme", "http"},
                                                               {":authority", "localhost"},
                                                               {":path", std::string(path)}};
    for (const auto& h : headers)
      fields.emplace_back(lower(std::string(h.name)), std::string(h.value));
    std::vector<nghttp2_nv> nva;
    for (auto& [n, v] : fields) {
      nva.push_back(nghttp2_nv{reinterpret_cast<uint8_t*>(n.data()),
                               reinterpret_cast<uint8_t*>(v.data()), n.size(), v.size(),
                               NGHTTP2_NV_FLAG_NONE});
    }
    auto upload = std::make_unique<Upload>();
    upload->data = std::move(body);
    nghttp2_data_provider provider;
    provider.source.ptr = upload.get();
    provider.read_callback = &read_upload;
    const bool has_body = !upload->data.empty();
    const int32_t id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                              has_body ? &provider : nullptr, nullptr);
    if (id > 0) {
      responses_[id];
      uploads_.push_back(std::move(upload));
    }
    return id;
  }

  // Submits a request whose body stays open: HEADERS without END_STREAM; send_more() adds body
  // bytes (and ends it with `end`).
  int32_t submit_open(std::string_view method, std::string_view path,
                      const HttpHeaders& headers = {}) {
    std::vector<std::pair<std::string, std::string>> fields = {{":method", std::string(method)},
                                                               {":scheme", "http"},
                                                               {":authority", "localhost"},
                                                               {":path", std::string(path)}};
    for (const auto& h : headers)
      fields.emplace_back(lower(std::string(h.name)), std::string(h.value));
    std::vector<nghttp2_nv> nva;
    for (auto& [n, v] : fields) {
      nva.push_back(nghttp2_nv{reinterpret_cast<uint8_t*>(n.data()),
                               reinterpret_cast<uint8_t*>(v.data()), n.size(), v.size(),
                               NGHTTP2_NV_FLAG_NONE});
    }
    auto upload = std::make_unique<Upload>();
    upload->open = true;
    nghttp2_data_provider provider;
    provider.source.ptr = upload.get();
    provider.read_callback = &read_upload;
    const int32_t id =
        nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(), &provider, nullptr);
    if (id > 0) {
      responses_[id];
      open_uploads_[id] = upload.get();
      uploads_.push_back(std::move(upload));
    }
    return id;
  }
  void send_more(int32_t id, std::string_view data, bool end = false) {
    Upload* u = open_uploads_[id];
    if (u == nullptr) return;
    u->data.append(data);
    if (end) u->open = false;
    nghttp2_session_resume_data(session_, id);
  }
  uint32_t goaway_error_code() const { return goaway_error_code_; }

  void rst(int32_t id, uint32_t code = NGHTTP2_CANCEL) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, code);
  }
  // Grants the stream the window for everything it has received (manual_windows).
  void open_window(int32_t id) {
    slow_.erase(id);
    const int32_t pending = consumed_unacked_[id];
    consumed_unacked_[id] = 0;
    if (pending > 0) nghttp2_session_consume_stream(session_, id, static_cast<size_t>(pending));
  }
  // With manual_windows: streams whose window the client does not reopen.
  void hold_window(int32_t id) { slow_.insert(id); }

  // Exchanges frames until `done()` or `timeout_ms`; false on timeout or a dead connection.
  bool run_until(const std::function<bool()>& done, int timeout_ms = 5000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (!send_pending()) return done();
      if (done()) return true;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return false;
      if (!read_some(static_cast<int>(std::min<int64_t>(left, 100)))) return done();
    }
  }
  bool wait_closed(int32_t id, int timeout_ms = 5000) {
    return run_until([&] { return responses_[id].closed; }, timeout_ms);
  }

  Response& response(int32_t id) { return responses_[id]; }
  bool goaway() const { return goaway_; }
  int32_t goaway_last_stream_id() const { return goaway_last_stream_id_; }
  bool eof() const { return eof_; }
  // Bytes of DATA received on a stream so far.
  size_t received(int32_t id) { return responses_[id].body.size(); }
  nghttp2_session* session() { return session_; }
  // Raw bytes to the server (send_preface false).
  void write_raw(std::string_view data) { write_all(data.data(), data.size()); }

 private:
  struct Upload {
    std::string data;
    size_t offset = 0;
    bool open = false;  // more may come (submit_open): defer at the end of data
  };

  static std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  bool write_all(const char* data, size_t len) {
    while (len > 0) {
      const ssize_t n = ssl_ != nullptr ? SSL_write(ssl_, data, static_cast<int>(len))
                                        : ::send(fd_, data, len, MSG_NOSIGNAL);
      if (n > 0) {
        data += n;
        len -= static_cast<size_t>(n);
        continue;
      }
      if (ssl_ != nullptr) {
        const int err = SSL_get_error(ssl_, static_cast<int>(n));
        if (err != SSL_ERROR_WANT_WRITE && err != SSL_ERROR_WANT_READ) return false;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return false;
      }
      pollfd p{fd_, POLLOUT, 0};
      poll(&p, 1, 100);
    }
    return true;
  }

  bool send_pending() {
    if (fd_ < 0) return false;
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) return false;
      if (n == 0) return true;
      if (!write_all(reinterpret_cast<const char*>(data), static_cast<size_t>(n))) return false;
    }
  }

  // Reads what is there (waiting up to wait_ms); false when the connection is gone.
  bool read_some(int wait_ms) {
    if (fd_ < 0 || eof_) return false;
    if (ssl_ == nullptr || SSL_pending(ssl_) == 0) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, wait_ms) <= 0) return true;
    }
    uint8_t buf[16384];
    for (;;) {
      const ssize_t n =
          ssl_ != nullptr ? SSL_read(ssl_, buf, sizeof(buf)) : ::recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) {
        if (nghttp2_session_mem_recv(session_, buf, static_cast<size_t>(n)) < 0) return false;
        consume_windows();
        continue;
      }
      if (ssl_ != nullptr) {
        const int err = SSL_get_error(ssl_, static_cast<int>(n));
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return true;
        eof_ = true;
        return false;
      }
      if (n == 0) {
        eof_ = true;
        return false;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
      eof_ = true;
      return false;
    }
  }

  // manual_windows: the connection window is always reopened; streams too unless held.
  void consume_windows() {
    if (!options_.manual_windows) return;
    for (auto& [id, pending] : consumed_unacked_) {
      if (pending == 0 || slow_.count(id) != 0) continue;
      nghttp2_session_consume_stream(session_, id, static_cast<size_t>(pending));
      pending = 0;
    }
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                       size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* arg) {
    auto* self = static_cast<Http2TestClient*>(arg);
    Response& r = self->responses_[frame->hd.stream_id];
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") {
      r.status = std::atoi(std::string(v).c_str());
    } else if (frame->headers.cat == NGHTTP2_HCAT_HEADERS && r.status != 0) {
      r.trailers.add(n, v);
    } else {
      r.headers.add(n, v);
    }
    return 0;
  }
  static int on_data(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data, size_t len,
                     void* arg) {
    auto* self = static_cast<Http2TestClient*>(arg);
    self->responses_[id].body.append(reinterpret_cast<const char*>(data), len);
    if (self->options_.manual_windows) {
      nghttp2_session_consume_connection(session, len);
      self->consumed_unacked_[id] += static_cast<int32_t>(len);
    }
    return 0;
  }
  static int on_frame(nghttp2_session*, const nghttp2_frame* frame, void* arg) {
    auto* self = static_cast<Http2TestClient*>(arg);
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      self->goaway_ = true;
      self->goaway_last_stream_id_ = frame->goaway.last_stream_id;
      self->goaway_error_code_ = frame->goaway.error_code;
    }
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
      self->responses_[frame->hd.stream_id].ended = true;
    }
    return 0;
  }
  static int on_close(nghttp2_session*, int32_t id, uint32_t code, void* arg) {
    auto* self = static_cast<Http2TestClient*>(arg);
    Response& r = self->responses_[id];
    r.closed = true;
    r.error_code = code;
    return 0;
  }
  static ssize_t read_upload(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                             uint32_t* flags, nghttp2_data_source* source, void*) {
    auto* u = static_cast<Upload*>(source->ptr);
    if (u->open && u->offset == u->data.size()) return NGHTTP2_ERR_DEFERRED;
    const size_t n = std::min(length, u->data.size() - u->offset);
    std::memcpy(buf, u->data.data() + u->offset, n);
    u->offset += n;
    if (u->offset == u->data.size() && !u->open) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  Options options_;
  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string alpn_;
  std::string peer_cn_;
  nghttp2_session* session_ = nullptr;
  std::map<int32_t, Response> responses_;
  std::vector<std::unique_ptr<Upload>> uploads_;
  std::map<int32_t, int32_t> consumed_unacked_;
  std::set<int32_t> slow_;
  std::map<int32_t, Upload*> open_uploads_;
  bool goaway_ = false;
  int32_t goaway_last_stream_id_ = -1;
  uint32_t goaway_error_code_ = 0;
  bool eof_ = false;
};

}  // namespace cutline::proto::testing
