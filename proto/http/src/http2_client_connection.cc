#include "http2_client_connection.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>

#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/tls/tls_context.h"

namespace cutline::proto {

namespace {

// ALPN in wire format: what an HTTP/2 request offers, and kAuto's offer.
constexpr unsigned char kAlpnH2[] = {2, 'h', '2'};
constexpr unsigned char kAlpnAuto[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

bool is_connection_header(std::string_view name) {
  return iequals(name, "connection") || iequals(name, "keep-alive") ||
         iequals(name, "proxy-connection") || iequals(name, "transfer-encoding") ||
         iequals(name, "upgrade") || iequals(name, "host") || iequals(name, "content-length") ||
         iequals(name, "te");
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

nghttp2_nv make_nv(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                    value.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

// ---- Http2ClientConnection ----------------------------------------------------------------------

Http2ClientConnection::Http2ClientConnection(HttpClient::Http2Pool& pool, std::string key,
                                             bool auto_protocol)
    : pool_(pool), key_(std::move(key)), auto_protocol_(auto_protocol) {}

Http2ClientConnection::~Http2ClientConnection() {
  if (session_ != nullptr) nghttp2_session_del(session_);
}

bool Http2ClientConnection::connect(const sockaddr* addr, socklen_t addr_len, ssl_st* ssl) {
  if (ssl != nullptr) {
    if (auto_protocol_) {
      SSL_set_alpn_protos(ssl, kAlpnAuto, sizeof(kAlpnAuto));
    } else {
      SSL_set_alpn_protos(ssl, kAlpnH2, sizeof(kAlpnH2));
    }
  }
  ssl_ = ssl;
  conn_ = Connection::connect(
      pool_.loop, addr, addr_len, pool_.options.connect_timeout_ms, *this,
      ConnectionOptions{pool_.options.high_water_bytes, pool_.options.low_water_bytes}, ssl);
  return conn_ != nullptr;
}

bool Http2ClientConnection::has_capacity() const {
  if (retired_ || going_away_) return false;
  uint32_t limit = kDefaultMaxStreams;
  if (session_ != nullptr) {
    limit = std::min(limit, nghttp2_session_get_remote_settings(
                                session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS));
  }
  return streams() < limit;
}

void Http2ClientConnection::add(std::shared_ptr<Http2Exchange> exchange) {
  exchange->connection = this;
  conn_->set_read_timeout(0);
  if (!connected_) {
    pending_.push_back(std::move(exchange));
    return;
  }
  submit(exchange);
  flush();
}

bool Http2ClientConnection::start_session() {
  nghttp2_session_callbacks* cb = nullptr;
  if (nghttp2_session_callbacks_new(&cb) != 0) return false;
  nghttp2_session_callbacks_set_on_header_callback(cb, &on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, &on_stream_close);
  nghttp2_option* option = nullptr;
  nghttp2_option_new(&option);
  // Stream windows are given back when the body was delivered (pause = back-pressure).
  nghttp2_option_set_no_auto_window_update(option, 1);
  const int rv = nghttp2_session_client_new2(&session_, cb, this, option);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(cb);
  if (rv != 0) return false;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(kStreamWindowBytes)},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 2);
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindowBytes);
  return true;
}

void Http2ClientConnection::on_connected() {
  if (ssl_ != nullptr && negotiated_alpn(ssl_) != "h2") {
    if (auto_protocol_) {
      // An HTTP/1.1 upstream: remember it and send these requests the HTTP/1.1 way.
      pool_.remember_http1(key_);
      auto waiting = std::move(pending_);
      pending_.clear();
      conn_->close();
      retire();
      for (auto& exchange : waiting) {
        exchange->connection = nullptr;
        if (!exchange->active()) continue;
        pool_.place(exchange);
      }
      return;
    }
    return fail_all(ClientErrorKind::kConnectFailed,
                    "upstream " + key_ + " did not select HTTP/2 (ALPN h2)");
  }
  connected_ = true;
  if (!start_session()) {
    return fail_all(ClientErrorKind::kConnectFailed, "cannot create an HTTP/2 session");
  }
  auto waiting = std::move(pending_);
  pending_.clear();
  for (auto& exchange : waiting) {
    if (exchange->active()) submit(exchange);
  }
  flush();
}

void Http2ClientConnection::submit(const std::shared_ptr<Http2Exchange>& exchange) {
  ClientRequest& req = exchange->request();
  std::string authority;
  if (auto host = req.headers.get("host")) {
    authority = std::string(*host);
  } else {
    authority = req.host.find(':') != std::string::npos ? "[" + req.host + "]" : req.host;
    const uint16_t default_port = req.tls ? 443 : 80;
    if (req.port != default_port) authority += ":" + std::to_string(req.port);
  }
  const std::string method = req.method;
  const std::string scheme = req.tls ? "https" : "http";
  const std::string path = req.target.empty() ? "/" : req.target;
  const bool has_body =
      !req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
  const std::string content_length = std::to_string(req.body.size());
  static const std::string kMethod = ":method", kScheme = ":scheme", kAuthority = ":authority",
                           kPath = ":path", kContentLength = "content-length";
  std::vector<std::string> names;
  names.reserve(req.headers.size());
  std::vector<nghttp2_nv> nva;
  nva.reserve(req.headers.size() + 5);
  nva.push_back(make_nv(kMethod, method));
  nva.push_back(make_nv(kScheme, scheme));
  nva.push_back(make_nv(kAuthority, authority));
  nva.push_back(make_nv(kPath, path));
  if (has_body) nva.push_back(make_nv(kContentLength, content_length));
  for (const HttpHeader& h : req.headers) {
    if (!is_connection_header(h.name)) names.push_back(lower(h.name));
  }
  size_t i = 0;
  for (const HttpHeader& h : req.headers) {
    if (!is_connection_header(h.name)) nva.push_back(make_nv(names[i++], h.value));
  }
  nghttp2_data_provider provider{};
  provider.read_callback = &read_body;
  const int32_t id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(),
                                            has_body ? &provider : nullptr, nullptr);
  if (id < 0) {
    exchange->connection = nullptr;
    exchange->fail(ClientError{ClientErrorKind::kConnectFailed,
                               std::string("HTTP/2 request refused locally: ") +
                                   nghttp2_strerror(id) + " (" + key_ + ")"});
    return;
  }
  exchange->stream_id = id;
  exchange->reused = completed_ > 0;
  StreamState& st = by_stream_[id];
  st.exchange = exchange;
}

ssize_t Http2ClientConnection::read_body(nghttp2_session* /*session*/, int32_t stream_id,
                                         uint8_t* buf, size_t length, uint32_t* data_flags,
                                         nghttp2_data_source* /*source*/, void* user_data) {
  auto* self = static_cast<Http2ClientConnection*>(user_data);
  auto it = self->by_stream_.find(stream_id);
  if (it == self->by_stream_.end()) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  const std::string& body = it->second.exchange->request().body;
  const size_t offset = it->second.body_offset;
  const size_t n = std::min(length, body.size() - std::min(offset, body.size()));
  if (n > 0) std::memcpy(buf, body.data() + offset, n);
  it->second.body_offset += n;
  if (it->second.body_offset >= body.size()) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

void Http2ClientConnection::flush() {
  if (retired_ || in_recv_ || session_ == nullptr || !conn_->open()) return;
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      return fail_all(ClientErrorKind::kClosedMidBody, std::string("HTTP/2 session error: ") +
                                                           nghttp2_strerror(static_cast<int>(n)));
    }
    if (n == 0) break;
    conn_->write(std::string_view(reinterpret_cast<const char*>(data), static_cast<size_t>(n)));
  }
  if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
    // GOAWAY exchanged and every stream done: the session is over.
    conn_->close_after_flush(100);
    retire();
    return;
  }
  note_idle();
}

void Http2ClientConnection::note_idle() {
  if (streams() == 0 && conn_->open()) conn_->set_read_timeout(pool_.options.idle_timeout_ms);
}

void Http2ClientConnection::on_readable(evbuffer* input) {
  if (retired_ || session_ == nullptr) {
    evbuffer_drain(input, evbuffer_get_length(input));
    return;
  }
  in_recv_ = true;
  while (evbuffer_get_length(input) > 0) {
    evbuffer_iovec vec;
    if (evbuffer_peek(input, -1, nullptr, &vec, 1) < 1) break;
    const ssize_t n =
        nghttp2_session_mem_recv(session_, static_cast<const uint8_t*>(vec.iov_base), vec.iov_len);
    if (n < 0) {
      in_recv_ = false;
      return fail_all(ClientErrorKind::kParse, std::string("HTTP/2 protocol error from ") + key_ +
                                                   ": " + nghttp2_strerror(static_cast<int>(n)));
    }
    evbuffer_drain(input, static_cast<size_t>(n));
    if (retired_) break;
  }
  in_recv_ = false;
  if (!retired_) flush();
}

void Http2ClientConnection::on_drained() { flush(); }

std::shared_ptr<Http2Exchange> Http2ClientConnection::find(int32_t stream_id) const {
  auto it = by_stream_.find(stream_id);
  return it == by_stream_.end() ? nullptr : it->second.exchange;
}

int Http2ClientConnection::on_header(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                                     const uint8_t* name, size_t name_len, const uint8_t* value,
                                     size_t value_len, uint8_t /*flags*/, void* user_data) {
  auto* self = static_cast<Http2ClientConnection*>(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto it = self->by_stream_.find(frame->hd.stream_id);
  if (it == self->by_stream_.end()) return 0;
  const std::string_view n(reinterpret_cast<const char*>(name), name_len);
  const std::string_view v(reinterpret_cast<const char*>(value), value_len);
  if (n == ":status") {
    int status = 0;
    for (char c : v) status = status * 10 + (c - '0');
    it->second.status = status;
    return 0;
  }
  if (!n.empty() && n.front() == ':') return 0;
  it->second.headers.add(std::string(n), std::string(v));
  return 0;
}

int Http2ClientConnection::on_frame_recv(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                                         void* user_data) {
  auto* self = static_cast<Http2ClientConnection*>(user_data);
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    // Streams above last_stream_id are closed by nghttp2 (refused: retried elsewhere); the rest
    // finish here. No new stream goes on this connection.
    self->going_away_ = true;
    return 0;
  }
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  auto it = self->by_stream_.find(frame->hd.stream_id);
  if (it == self->by_stream_.end()) return 0;
  std::shared_ptr<Http2Exchange> exchange = it->second.exchange;
  StreamState& st = it->second;
  if (frame->hd.type == NGHTTP2_HEADERS && !exchange->head_delivered()) {
    if (st.status >= 100 && st.status < 200) {  // interim response: the final one follows
      st.headers.clear();
      st.status = 0;
      return 0;
    }
    HttpHeaders headers = std::move(st.headers);
    st.headers.clear();
    exchange->deliver_head(st.status, headers);
  }
  if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
    auto again = self->by_stream_.find(frame->hd.stream_id);
    if (again == self->by_stream_.end()) return 0;            // cancelled from a callback
    HttpHeaders trailers = std::move(again->second.headers);  // trailers (empty otherwise)
    self->by_stream_.erase(again);
    ++self->completed_;
    exchange->end_stream(trailers);
  }
  return 0;
}

int Http2ClientConnection::on_data_chunk(nghttp2_session* session, uint8_t /*flags*/,
                                         int32_t stream_id, const uint8_t* data, size_t len,
                                         void* user_data) {
  auto* self = static_cast<Http2ClientConnection*>(user_data);
  // The connection window is given back at once: a paused stream holds only its own window.
  nghttp2_session_consume_connection(session, len);
  std::shared_ptr<Http2Exchange> exchange = self->find(stream_id);
  if (!exchange) return 0;
  exchange->deliver_body(std::string_view(reinterpret_cast<const char*>(data), len));
  return 0;
}

int Http2ClientConnection::on_stream_close(nghttp2_session* /*session*/, int32_t stream_id,
                                           uint32_t error_code, void* user_data) {
  auto* self = static_cast<Http2ClientConnection*>(user_data);
  auto it = self->by_stream_.find(stream_id);
  if (it == self->by_stream_.end()) {
    self->note_idle();
    return 0;  // ended normally or cancelled by us
  }
  std::shared_ptr<Http2Exchange> exchange = std::move(it->second.exchange);
  self->by_stream_.erase(it);
  exchange->connection = nullptr;
  if (!exchange->active()) return 0;
  if (error_code == NGHTTP2_REFUSED_STREAM && !exchange->head_delivered() && !exchange->retried) {
    // The upstream never processed it (GOAWAY or REFUSED_STREAM): send it once more elsewhere.
    exchange->retried = true;
    exchange->stream_id = -1;
    HttpClient::Http2Pool* pool = &self->pool_;
    pool->loop.post([pool, exchange] {
      if (exchange->active()) pool->place(exchange);
    });
    return 0;
  }
  const std::string why = std::string("stream reset by upstream (") +
                          nghttp2_http2_strerror(error_code) + ") (" + self->key_ + ")";
  exchange->fail(ClientError{exchange->head_delivered() ? ClientErrorKind::kClosedMidBody
                                                        : ClientErrorKind::kClosedBeforeHead,
                             why});
  return 0;
}

void Http2ClientConnection::cancel_stream(Http2Exchange* exchange) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->get() == exchange) {
      pending_.erase(it);
      note_idle();
      return;
    }
  }
  auto it = by_stream_.find(exchange->stream_id);
  if (it == by_stream_.end() || it->second.exchange.get() != exchange) return;
  // Keep the stream's entry until nghttp2 closes it, without an exchange to report to.
  by_stream_.erase(it);
  if (session_ != nullptr) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, exchange->stream_id, NGHTTP2_CANCEL);
  }
  flush();
}

void Http2ClientConnection::consumed(int32_t stream_id, size_t bytes) {
  if (session_ == nullptr || retired_ || stream_id < 0) return;
  nghttp2_session_consume_stream(session_, stream_id, bytes);
  flush();
}

void Http2ClientConnection::on_closed(Connection::CloseReason reason, std::string_view message) {
  using Reason = Connection::CloseReason;
  const std::string where = std::string(message) + " (" + key_ + ")";
  switch (reason) {
    case Reason::kConnectRefused:
      return fail_all(ClientErrorKind::kConnectRefused, where);
    case Reason::kConnectTimeout:
      return fail_all(ClientErrorKind::kConnectTimeout, where);
    case Reason::kConnectFailed:
      return fail_all(ClientErrorKind::kConnectFailed, where);
    default:
      return fail_all(ClientErrorKind::kClosedMidBody, "upstream connection lost: " + where,
                      /*lost=*/true);
  }
}

void Http2ClientConnection::fail_all(ClientErrorKind kind, const std::string& message, bool lost) {
  conn_->close();
  retire();
  auto waiting = std::move(pending_);
  pending_.clear();
  auto streams = std::move(by_stream_);
  by_stream_.clear();
  for (auto& exchange : waiting) {
    exchange->connection = nullptr;
    exchange->fail(ClientError{kind, message});
  }
  for (auto& [id, st] : streams) {
    std::shared_ptr<Http2Exchange> exchange = std::move(st.exchange);
    exchange->connection = nullptr;
    if (exchange->ended()) continue;  // complete, only waiting for a resume to deliver
    if (lost && exchange->reused && !exchange->head_delivered() && !exchange->retried) {
      exchange->retried = true;
      exchange->stream_id = -1;
      HttpClient::Http2Pool* pool = &pool_;
      pool->loop.post([pool, exchange] {
        if (exchange->active()) pool->place(exchange);
      });
      continue;
    }
    ClientErrorKind k = kind;
    if (kind == ClientErrorKind::kClosedMidBody && !exchange->head_delivered()) {
      k = ClientErrorKind::kClosedBeforeHead;
    }
    exchange->fail(ClientError{k, message});
  }
}

void Http2ClientConnection::close_now() {
  retired_ = true;
  if (conn_) conn_->close();
}

void Http2ClientConnection::retire() {
  if (retired_) return;
  retired_ = true;
  pool_.retire(this);
}

// ---- HttpClient::Http2Pool ----------------------------------------------------------------------

HttpClient::Http2Pool::Http2Pool(HttpClient& client, EventLoop& loop, const ClientOptions& options)
    : client(client), loop(loop), options(options) {
  sweep_event = event_new(loop.base(), -1, 0, &Http2Pool::on_sweep, this);
}

HttpClient::Http2Pool::~Http2Pool() {
  auto exchanges = active;
  for (Http2Exchange* exchange : exchanges) exchange->abandon();
  for (auto& [raw, connection] : all) connection->close_now();
  all.clear();
  graveyard.clear();
  event_free(sweep_event);
}

ClientHandle HttpClient::Http2Pool::start(std::shared_ptr<Http2Exchange> exchange) {
  ClientHandle handle(exchange);
  place(std::move(exchange));
  return handle;
}

void HttpClient::Http2Pool::place(std::shared_ptr<Http2Exchange> exchange) {
  ClientRequest& req = exchange->request();
  if (req.protocol == ClientProtocol::kAuto && known_http1(exchange->key)) {
    // ALPN chose HTTP/1.1 for this upstream: the request continues on the HTTP/1.1 pool, its
    // callbacks going straight to the caller; this exchange only forwards cancel/pause/resume.
    ClientRequest copy = req;
    ClientCallbacks forward;
    std::weak_ptr<Http2Exchange> weak = exchange;
    forward.on_head = [weak](int status, HttpHeaders& headers) {
      if (auto e = weak.lock()) e->deliver_head(status, headers);
    };
    forward.on_body = [weak](std::string_view data) {
      if (auto e = weak.lock()) e->deliver_body(data);
    };
    forward.on_complete = [weak](HttpHeaders& trailers) {
      if (auto e = weak.lock()) e->end_stream(trailers);
    };
    forward.on_error = [weak](const ClientError& error) {
      if (auto e = weak.lock()) e->fail(error);
    };
    copy.protocol = ClientProtocol::kHttp1;
    const bool paused = exchange->paused();
    exchange->fallback = client.start(std::move(copy), std::move(forward));
    if (paused) exchange->fallback.pause();
    return;
  }
  auto& list = by_key[exchange->key];
  for (Http2ClientConnection* connection : list) {
    if (connection->has_capacity()) return connection->add(std::move(exchange));
  }
  const bool auto_protocol = req.protocol == ClientProtocol::kAuto;
  auto connection = std::make_unique<Http2ClientConnection>(*this, exchange->key, auto_protocol);
  ssl_st* ssl = nullptr;
  if (req.tls) {
    ssl = req.tls->new_client_ssl(req.tls_server_name.empty() ? req.host : req.tls_server_name);
  }
  if ((req.tls && ssl == nullptr) ||
      !connection->connect(reinterpret_cast<const sockaddr*>(&exchange->addr), exchange->addr_len,
                           ssl)) {
    loop.post([exchange, key = exchange->key] {
      exchange->fail(
          ClientError{ClientErrorKind::kConnectFailed, "cannot create a socket for " + key});
    });
    return;
  }
  ++client.connections_opened_;
  Http2ClientConnection* raw = connection.get();
  all.emplace(raw, std::move(connection));
  list.push_back(raw);
  raw->add(std::move(exchange));
}

void HttpClient::Http2Pool::retire(Http2ClientConnection* connection) {
  auto it = all.find(connection);
  if (it == all.end()) return;
  auto& list = by_key[connection->key()];
  list.erase(std::remove(list.begin(), list.end(), connection), list.end());
  if (list.empty()) by_key.erase(connection->key());
  graveyard.push_back(std::move(it->second));
  all.erase(it);
  event_active(sweep_event, EV_TIMEOUT, 0);
}

void HttpClient::Http2Pool::on_sweep(int /*fd*/, short /*what*/, void* arg) {
  static_cast<Http2Pool*>(arg)->graveyard.clear();
}

}  // namespace cutline::proto
