#pragma once
// The upstream of the HttpClient HTTP/2 tests: a scripted nghttp2 server (on proto's Listener and
// Connection) that the test drives stream by stream (answer, reset, GOAWAY, drop the connection),
// and the client side's per-request Outcome.

#include <event2/buffer.h>
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cutline/proto/http/http_client.h"
#include "cutline/proto/net/connection.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/listener.h"
#include "cutline/proto/tls/tls_context.h"
#include "net_test_util.h"
#include "support/wait_for.h"

namespace cutline::proto::testing {

// ---- a scripted HTTP/2 server -------------------------------------------------------------------

struct SeenStream {
  int conn = 0;  // index of the connection it came on
  int32_t id = 0;
  std::string path;
  std::string body;
  bool closed = false;
  uint32_t close_code = 0;  // RST_STREAM / close error code as seen by the server
};

class H2Server {
 public:
  // auto_reply: answer every request at once with 200 and body "ok <path>".
  explicit H2Server(bool auto_reply, uint32_t max_streams = 100,
                    std::shared_ptr<const TlsContext> tls = nullptr)
      : auto_reply_(auto_reply), max_streams_(max_streams), tls_(std::move(tls)), workers_(1) {
    workers_.start();
    run([this] {
      auto l = Listener::open(workers_.loop(0), "127.0.0.1", 0, 64, [this](int fd) { accept(fd); });
      port_ = l.value()->port();
      listener_ = std::move(l).value();
    });
  }
  ~H2Server() {
    run([this] {
      listener_.reset();
      conns_.clear();
    });
    workers_.stop();
  }
  uint16_t port() const { return port_; }
  Notes& notes() { return notes_; }
  std::vector<SeenStream> streams() {
    return notes_.read<std::vector<SeenStream>>(
        [&] { return std::vector<SeenStream>(seen_.begin(), seen_.end()); });
  }
  int connections() {
    return notes_.read<int>([&] { return static_cast<int>(conn_count_); });
  }
  size_t seen_count() {
    return notes_.read<size_t>([&] { return seen_.size(); });
  }
  // Waits until the server saw the stream close; its close code (RST_STREAM's error code).
  std::optional<uint32_t> wait_closed(size_t index) {
    std::optional<uint32_t> code;
    notes_.wait_for([&] { return seen_.size() > index && seen_[index].closed; });
    notes_.update([&] {
      if (seen_.size() > index && seen_[index].closed) code = seen_[index].close_code;
    });
    return code;
  }
  bool wait_streams(size_t n) {
    return notes_.wait_for([&] { return seen_.size() >= n; });
  }

  void respond(int conn, int32_t id, int status = 200) {
    run([=, this] { conns_[conn]->respond(id, status); });
  }
  void send(int conn, int32_t id, std::string data, bool end) {
    run([=, this] { conns_[conn]->send(id, data, end); });
  }
  void reset(int conn, int32_t id, uint32_t code = NGHTTP2_INTERNAL_ERROR) {
    run([=, this] { conns_[conn]->reset(id, code); });
  }
  void goaway(int conn, int32_t last_id) {
    run([=, this] { conns_[conn]->goaway(last_id); });
  }
  // Bytes the server may still send on a stream (the client's stream window).
  int32_t window(int conn, int32_t id) {
    int32_t w = 0;
    run([&, this] {
      w = nghttp2_session_get_stream_remote_window_size(conns_[conn]->session, id);
    });
    return w;
  }
  // Bytes queued for a stream and not yet sent (held back by flow control).
  size_t unsent(int conn, int32_t id) {
    size_t n = 0;
    run([&, this] { n = conns_[conn]->out[id].data.size(); });
    return n;
  }

 private:
  struct Out {
    std::string data;
    bool end = false;
    bool deferred = false;
  };

  struct Conn : Connection::Handler {
    H2Server& server;
    int index;
    std::unique_ptr<Connection> conn;
    nghttp2_session* session = nullptr;
    std::map<int32_t, SeenStream*> by_id;
    std::map<int32_t, Out> out;
    bool dead = false;

    Conn(H2Server& s, int i) : server(s), index(i) {}
    ~Conn() override {
      if (session) nghttp2_session_del(session);
    }

    void start() {
      nghttp2_session_callbacks* cb;
      nghttp2_session_callbacks_new(&cb);
      nghttp2_session_callbacks_set_on_header_callback(
          cb, [](nghttp2_session*, const nghttp2_frame* f, const uint8_t* n, size_t nl,
                 const uint8_t* v, size_t vl, uint8_t, void* u) {
            auto* c = static_cast<Conn*>(u);
            if (std::string_view(reinterpret_cast<const char*>(n), nl) == ":path") {
              c->server.notes_.update([&] {
                c->stream_locked(f->hd.stream_id).path.assign(reinterpret_cast<const char*>(v), vl);
              });
            }
            return 0;
          });
      nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
          cb, [](nghttp2_session*, uint8_t, int32_t id, const uint8_t* d, size_t len, void* u) {
            auto* c = static_cast<Conn*>(u);
            c->server.notes_.update(
                [&] { c->stream_locked(id).body.append(reinterpret_cast<const char*>(d), len); });
            return 0;
          });
      nghttp2_session_callbacks_set_on_frame_recv_callback(
          cb, [](nghttp2_session*, const nghttp2_frame* f, void* u) {
            auto* c = static_cast<Conn*>(u);
            if (f->hd.type == NGHTTP2_HEADERS && c->index == 0 &&
                c->stream(f->hd.stream_id).path == "/die") {
              return static_cast<int>(NGHTTP2_ERR_CALLBACK_FAILURE);  // drops the connection
            }
            if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
                (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 && c->server.auto_reply_) {
              const std::string body = "ok " + c->stream(f->hd.stream_id).path;
              c->respond(f->hd.stream_id, 200);
              c->send(f->hd.stream_id, body, true);
            }
            return 0;
          });
      nghttp2_session_callbacks_set_on_stream_close_callback(
          cb, [](nghttp2_session*, int32_t id, uint32_t code, void* u) {
            auto* c = static_cast<Conn*>(u);
            c->server.notes_.update([&] {
              SeenStream& s = c->stream_locked(id);
              s.closed = true;
              s.close_code = code;
            });
            return 0;
          });
      nghttp2_session_server_new(&session, cb, this);
      nghttp2_session_callbacks_del(cb);
      nghttp2_settings_entry iv[] = {
          {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, server.max_streams_}};
      nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, iv, 1);
      flush();
    }

    SeenStream& stream_locked(int32_t id) {
      auto it = by_id.find(id);
      if (it != by_id.end()) return *it->second;
      server.seen_.push_back(SeenStream{index, id, "", "", false, 0});
      // seen_ is a deque: references stay valid as it grows.
      SeenStream* s = &server.seen_.back();
      by_id[id] = s;
      return *s;
    }
    SeenStream& stream(int32_t id) {
      SeenStream* s = nullptr;
      server.notes_.update([&] { s = &stream_locked(id); });
      return *s;
    }

    void respond(int32_t id, int status) {
      const std::string st = std::to_string(status);
      nghttp2_nv nv[] = {
          {(uint8_t*)":status", (uint8_t*)st.data(), 7, st.size(), NGHTTP2_NV_FLAG_NONE}};
      nghttp2_data_provider p{};
      p.read_callback = [](nghttp2_session*, int32_t sid, uint8_t* buf, size_t len, uint32_t* flags,
                           nghttp2_data_source*, void* u) -> ssize_t {
        auto* c = static_cast<Conn*>(u);
        Out& o = c->out[sid];
        const size_t n = std::min(len, o.data.size());
        std::memcpy(buf, o.data.data(), n);
        o.data.erase(0, n);
        if (o.data.empty() && o.end) {
          *flags |= NGHTTP2_DATA_FLAG_EOF;
        } else if (n == 0) {
          o.deferred = true;
          return NGHTTP2_ERR_DEFERRED;
        }
        return static_cast<ssize_t>(n);
      };
      nghttp2_submit_response(session, id, nv, 1, &p);
      flush();
    }
    void send(int32_t id, const std::string& data, bool end) {
      Out& o = out[id];
      o.data += data;
      o.end = o.end || end;
      if (o.deferred) {
        o.deferred = false;
        nghttp2_session_resume_data(session, id);
      }
      flush();
    }
    void reset(int32_t id, uint32_t code) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, code);
      flush();
    }
    void goaway(int32_t last_id) {
      nghttp2_submit_goaway(session, NGHTTP2_FLAG_NONE, last_id, NGHTTP2_NO_ERROR, nullptr, 0);
      flush();
    }
    void flush() {
      if (dead) return;
      const uint8_t* data;
      ssize_t n;
      while ((n = nghttp2_session_mem_send(session, &data)) > 0) {
        conn->write(std::string_view(reinterpret_cast<const char*>(data), static_cast<size_t>(n)));
      }
    }
    void on_readable(evbuffer* input) override {
      while (evbuffer_get_length(input) > 0) {
        evbuffer_iovec v;
        evbuffer_peek(input, -1, nullptr, &v, 1);
        ssize_t n = nghttp2_session_mem_recv(session, static_cast<uint8_t*>(v.iov_base), v.iov_len);
        if (n < 0) {
          dead = true;
          conn->close();
          return;
        }
        evbuffer_drain(input, static_cast<size_t>(n));
      }
      flush();
    }
    void on_drained() override { flush(); }
    void on_closed(Connection::CloseReason, std::string_view) override { dead = true; }
  };

  void accept(int fd) {
    auto c = std::make_unique<Conn>(*this, static_cast<int>(conns_.size()));
    if (tls_) {
      c->conn = std::make_unique<Connection>(workers_.loop(0), fd, tls_->new_ssl(), *c,
                                             ConnectionOptions{});
    } else {
      c->conn = std::make_unique<Connection>(workers_.loop(0), fd, *c, ConnectionOptions{});
    }
    c->start();
    conns_.push_back(std::move(c));
    notes_.update([&] { ++conn_count_; });
  }

  void run(const std::function<void()>& fn) {
    workers_.run_on_all_and_wait([&](EventLoop&) { fn(); });
  }

  bool auto_reply_;
  uint32_t max_streams_;
  std::shared_ptr<const TlsContext> tls_;
  WorkerThreads workers_;
  std::unique_ptr<Listener> listener_;
  std::vector<std::unique_ptr<Conn>> conns_;
  uint16_t port_ = 0;
  Notes notes_;
  std::deque<SeenStream> seen_;  // guarded by notes_
  size_t conn_count_ = 0;        // guarded by notes_
};

// ---- the client side ----------------------------------------------------------------------------

struct Outcome {
  Notes notes;
  int status = 0;
  std::string body;
  std::optional<ClientError> error;
  bool done = false;
  bool pause_on_head = false;
  ClientHandle* handle = nullptr;  // for pause_on_head (loop thread only)

  ClientCallbacks callbacks() {
    ClientCallbacks cb;
    cb.on_head = [this](int st, HttpHeaders&) {
      if (pause_on_head && handle != nullptr) handle->pause();
      notes.update([&] { status = st; });
    };
    cb.on_body = [this](std::string_view d) { notes.update([&] { body.append(d); }); };
    cb.on_complete = [this](HttpHeaders&) { notes.update([&] { done = true; }); };
    cb.on_error = [this](const ClientError& e) {
      notes.update([&] {
        error = e;
        done = true;
      });
    };
    return cb;
  }
  bool wait_done(int timeout_ms = 5000) {
    return notes.wait_for([&] { return done; }, timeout_ms);
  }
  size_t body_size() {
    return notes.read<size_t>([&] { return body.size(); });
  }
};

inline ClientRequest h2_request(uint16_t port, const std::string& path,
                                ClientProtocol protocol = ClientProtocol::kHttp2) {
  ClientRequest req;
  req.method = "POST";
  req.host = "127.0.0.1";
  req.port = port;
  req.target = path;
  req.body = "{\"q\":\"" + path + "\"}";
  req.protocol = protocol;
  return req;
}

}  // namespace cutline::proto::testing
