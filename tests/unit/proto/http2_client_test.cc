// HttpClient over HTTP/2 (ClientRequest::protocol kHttp2 / kAuto): many streams multiplexed on
// one connection, the peer's SETTINGS_MAX_CONCURRENT_STREAMS respected by opening more
// connections, pause() of one stream not blocking another (flow control per stream), cancel() as
// RST_STREAM with the connection kept, upstream RST_STREAM and GOAWAY, and TLS with ALPN (h2, or
// HTTP/1.1 when the upstream picks it). The upstream is a scripted nghttp2 server defined here
// (on proto's Listener and Connection), driven stream by stream by the test.

#include <event2/buffer.h>
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <thread>

#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http/http_server.h"
#include "cutline/proto/net/connection.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/listener.h"
#include "cutline/proto/net/worker_threads.h"
#include "cutline/proto/tls/tls_context.h"
#include "tls_test_util.h"

namespace cutline::proto {
namespace {

using testing::ClientThread;
using testing::Notes;

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

// Polls `cond` (state the test cannot be notified of, such as a server's flow-control window)
// until it holds; false after timeout_ms.
bool eventually(const std::function<bool()>& cond, int timeout_ms = 5000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

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

ClientRequest h2_request(uint16_t port, const std::string& path,
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

TEST(Http2Client, ManyStreamsShareOneConnection) {
  H2Server server(/*auto_reply=*/true);
  ClientThread client;
  constexpr int kStreams = 20;
  std::vector<Outcome> out(kStreams);
  std::vector<ClientHandle> handles(kStreams);
  client.run([&] {
    for (int i = 0; i < kStreams; ++i) {
      handles[i] = client.client().start(h2_request(server.port(), "/s" + std::to_string(i)),
                                         out[i].callbacks());
    }
  });
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(out[i].wait_done()) << i;
    EXPECT_FALSE(out[i].error) << out[i].error->message;
    EXPECT_EQ(out[i].status, 200);
    EXPECT_EQ(out[i].body, "ok /s" + std::to_string(i));
  }
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(client.client().connections_opened(), 1u);
  for (const SeenStream& s : server.streams()) EXPECT_EQ(s.body, "{\"q\":\"" + s.path + "\"}");
  client.run([&] { handles.clear(); });
}

TEST(Http2Client, PeerStreamLimitOpensAnotherConnection) {
  H2Server server(/*auto_reply=*/false, /*max_streams=*/5);
  ClientThread client;
  // One exchange first so that the server's SETTINGS are known.
  Outcome first;
  ClientHandle first_handle;
  client.run([&] {
    first_handle = client.client().start(h2_request(server.port(), "/first"), first.callbacks());
  });
  ASSERT_TRUE(server.wait_streams(1));
  server.respond(0, 1);
  server.send(0, 1, "done", true);
  ASSERT_TRUE(first.wait_done());
  constexpr int kStreams = 12;
  std::vector<Outcome> out(kStreams);
  std::vector<ClientHandle> handles(kStreams);
  client.run([&] {
    for (int i = 0; i < kStreams; ++i) {
      handles[i] = client.client().start(h2_request(server.port(), "/h" + std::to_string(i)),
                                         out[i].callbacks());
    }
  });
  ASSERT_TRUE(server.wait_streams(1 + kStreams));
  EXPECT_EQ(server.connections(), 3);  // 5 + 5 + 2 streams
  std::map<int, int> per_conn;
  for (const SeenStream& s : server.streams()) {
    if (s.path != "/first") ++per_conn[s.conn];
  }
  for (const auto& [conn, n] : per_conn) EXPECT_LE(n, 5) << "connection " << conn;
  for (const SeenStream& s : server.streams()) {
    if (s.path == "/first") continue;
    server.respond(s.conn, s.id);
    server.send(s.conn, s.id, "x", true);
  }
  for (auto& o : out) ASSERT_TRUE(o.wait_done());
  client.run([&] {
    handles.clear();
    first_handle = ClientHandle();
  });
}

TEST(Http2Client, PausedStreamDoesNotBlockItsNeighbour) {
  H2Server server(/*auto_reply=*/false);
  ClientThread client;
  Outcome a, b;
  ClientHandle ha, hb;
  a.pause_on_head = true;
  a.handle = &ha;
  client.run([&] {
    ha = client.client().start(h2_request(server.port(), "/a"), a.callbacks());
    hb = client.client().start(h2_request(server.port(), "/b"), b.callbacks());
  });
  ASSERT_TRUE(server.wait_streams(2));
  const auto seen = server.streams();
  const int32_t id_a = seen[0].path == "/a" ? seen[0].id : seen[1].id;
  const int32_t id_b = seen[0].path == "/a" ? seen[1].id : seen[0].id;
  server.respond(0, id_a);
  ASSERT_TRUE(a.notes.wait_for([&] { return a.status == 200; }));
  // 600 KiB for the paused stream: more than its 256 KiB window, so the rest waits upstream.
  server.send(0, id_a, std::string(600 * 1024, 'a'), true);
  ASSERT_TRUE(eventually([&] { return server.window(0, id_a) == 0; }));
  EXPECT_GT(server.unsent(0, id_a), 0u);
  EXPECT_EQ(a.body_size(), 0u);  // paused: nothing delivered
  // The neighbour on the same connection still flows.
  server.respond(0, id_b);
  server.send(0, id_b, std::string(100 * 1024, 'b'), true);
  ASSERT_TRUE(b.wait_done());
  EXPECT_FALSE(b.error);
  EXPECT_EQ(b.body.size(), 100u * 1024);
  // Resumed, the paused stream gets everything (window updates let the upstream send the rest).
  client.run([&] { ha.resume(); });
  ASSERT_TRUE(a.wait_done());
  EXPECT_FALSE(a.error) << a.error->message;
  EXPECT_EQ(a.body.size(), 600u * 1024);
  EXPECT_EQ(server.connections(), 1);
  client.run([&] {
    ha = ClientHandle();
    hb = ClientHandle();
  });
}

TEST(Http2Client, CancelResetsTheStreamAndKeepsTheConnection) {
  H2Server server(/*auto_reply=*/false);
  ClientThread client;
  Outcome a;
  ClientHandle ha;
  client.run([&] { ha = client.client().start(h2_request(server.port(), "/a"), a.callbacks()); });
  ASSERT_TRUE(server.wait_streams(1));
  server.respond(0, 1);
  server.send(0, 1, "partial", false);
  ASSERT_TRUE(a.notes.wait_for([&] { return a.body == "partial"; }));
  client.run([&] { ha.cancel(); });
  EXPECT_EQ(server.wait_closed(0), std::optional<uint32_t>(NGHTTP2_CANCEL));
  EXPECT_FALSE(a.done);  // nothing after cancel
  // The next request goes on the same connection.
  Outcome b;
  ClientHandle hb;
  client.run([&] { hb = client.client().start(h2_request(server.port(), "/b"), b.callbacks()); });
  ASSERT_TRUE(server.wait_streams(2));
  server.respond(0, 3);
  server.send(0, 3, "fine", true);
  ASSERT_TRUE(b.wait_done());
  EXPECT_EQ(b.body, "fine");
  EXPECT_EQ(server.connections(), 1);
  EXPECT_FALSE(a.done);
  client.run([&] { hb = ClientHandle(); });
}

TEST(Http2Client, UpstreamResetIsClosedMidBodyOrBeforeHead) {
  H2Server server(/*auto_reply=*/false);
  ClientThread client;
  Outcome mid, before, other;
  ClientHandle h1, h2, h3;
  client.run([&] {
    h1 = client.client().start(h2_request(server.port(), "/mid"), mid.callbacks());
    h2 = client.client().start(h2_request(server.port(), "/before"), before.callbacks());
    h3 = client.client().start(h2_request(server.port(), "/other"), other.callbacks());
  });
  ASSERT_TRUE(server.wait_streams(3));
  std::map<std::string, int32_t> id;
  for (const SeenStream& s : server.streams()) id[s.path] = s.id;
  server.respond(0, id["/mid"]);
  server.send(0, id["/mid"], "data: x\n\n", false);
  ASSERT_TRUE(mid.notes.wait_for([&] { return !mid.body.empty(); }));
  server.reset(0, id["/mid"]);
  server.reset(0, id["/before"]);
  ASSERT_TRUE(mid.wait_done());
  ASSERT_TRUE(before.wait_done());
  ASSERT_TRUE(mid.error);
  EXPECT_EQ(mid.error->kind, ClientErrorKind::kClosedMidBody) << mid.error->message;
  ASSERT_TRUE(before.error);
  EXPECT_EQ(before.error->kind, ClientErrorKind::kClosedBeforeHead) << before.error->message;
  // The third stream is unaffected.
  server.respond(0, id["/other"]);
  server.send(0, id["/other"], "still here", true);
  ASSERT_TRUE(other.wait_done());
  EXPECT_FALSE(other.error);
  EXPECT_EQ(other.body, "still here");
  client.run([&] {
    h1 = ClientHandle();
    h2 = ClientHandle();
    h3 = ClientHandle();
  });
}

TEST(Http2Client, GoawayFinishesOpenStreamsAndRetriesRefusedOnesElsewhere) {
  H2Server server(/*auto_reply=*/false);
  ClientThread client;
  Outcome kept, refused;
  ClientHandle hk, hr;
  client.run([&] {
    hk = client.client().start(h2_request(server.port(), "/kept"), kept.callbacks());
    hr = client.client().start(h2_request(server.port(), "/refused"), refused.callbacks());
  });
  ASSERT_TRUE(server.wait_streams(2));
  std::map<std::string, int32_t> id;
  for (const SeenStream& s : server.streams()) id[s.path] = s.id;
  ASSERT_LT(id["/kept"], id["/refused"]);
  server.goaway(0, id["/kept"]);
  // The refused stream never reached the application: it is sent again on a new connection.
  ASSERT_TRUE(server.wait_streams(3));
  EXPECT_EQ(server.connections(), 2);
  const SeenStream again = server.streams()[2];
  EXPECT_EQ(again.path, "/refused");
  EXPECT_EQ(again.conn, 1);
  server.respond(1, again.id);
  server.send(1, again.id, "second try", true);
  server.respond(0, id["/kept"]);
  server.send(0, id["/kept"], "first", true);
  ASSERT_TRUE(kept.wait_done());
  ASSERT_TRUE(refused.wait_done());
  EXPECT_FALSE(kept.error);
  EXPECT_EQ(kept.body, "first");
  EXPECT_FALSE(refused.error) << refused.error->message;
  EXPECT_EQ(refused.body, "second try");
  client.run([&] {
    hk = ClientHandle();
    hr = ClientHandle();
  });
}

TEST(Http2Client, ConnectionLostMidBodyFailsEveryOpenStream) {
  auto server = std::make_unique<H2Server>(/*auto_reply=*/false);
  ClientThread client;
  Outcome a, b;
  ClientHandle ha, hb;
  const uint16_t port = server->port();
  client.run([&] {
    ha = client.client().start(h2_request(port, "/a"), a.callbacks());
    hb = client.client().start(h2_request(port, "/b"), b.callbacks());
  });
  ASSERT_TRUE(server->wait_streams(2));
  server->respond(0, 1);
  server->send(0, 1, "some", false);
  ASSERT_TRUE(a.notes.wait_for([&] { return !a.body.empty(); }));
  server.reset();  // closes every connection
  ASSERT_TRUE(a.wait_done());
  ASSERT_TRUE(b.wait_done());
  EXPECT_EQ(a.error->kind, ClientErrorKind::kClosedMidBody);
  EXPECT_EQ(b.error->kind, ClientErrorKind::kClosedBeforeHead);
  client.run([&] {
    ha = ClientHandle();
    hb = ClientHandle();
  });
}

TEST(Http2Client, ReusedConnectionLostBeforeAnyResponseIsRetriedOnce) {
  H2Server server(/*auto_reply=*/true);  // drops connection 0 when "/die" arrives on it
  ClientThread client;
  Outcome first, retried;
  ClientHandle h1, h2;
  client.run(
      [&] { h1 = client.client().start(h2_request(server.port(), "/one"), first.callbacks()); });
  ASSERT_TRUE(first.wait_done());
  EXPECT_EQ(first.body, "ok /one");
  client.run(
      [&] { h2 = client.client().start(h2_request(server.port(), "/die"), retried.callbacks()); });
  ASSERT_TRUE(retried.wait_done());
  EXPECT_FALSE(retried.error) << retried.error->message;
  EXPECT_EQ(retried.body, "ok /die");  // answered on a second connection
  EXPECT_EQ(server.connections(), 2);
  client.run([&] {
    h1 = ClientHandle();
    h2 = ClientHandle();
  });
}

TEST(Http2Client, FreshConnectionLostBeforeTheHeadIsNotRetried) {
  H2Server server(/*auto_reply=*/true);
  ClientThread client;
  Outcome o;
  ClientHandle h;
  client.run([&] { h = client.client().start(h2_request(server.port(), "/die"), o.callbacks()); });
  ASSERT_TRUE(o.wait_done());
  ASSERT_TRUE(o.error);
  EXPECT_EQ(o.error->kind, ClientErrorKind::kClosedBeforeHead) << o.error->message;
  EXPECT_EQ(server.connections(), 1);
  client.run([&] { h = ClientHandle(); });
}

class Http2ClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::ignore_sigpipe();
    files_ = testing::make_self_signed(dir_, "server");
    TlsClientConfig config;
    config.ca_file = files_.cert;
    client_tls_ = TlsContext::client(config).value();
  }
  std::shared_ptr<const TlsContext> server_tls(std::vector<std::string> alpn) {
    TlsServerConfig config;
    config.cert_file = files_.cert;
    config.key_file = files_.key;
    config.alpn = std::move(alpn);
    return TlsContext::server(config).value();
  }
  ClientRequest tls_request(uint16_t port, ClientProtocol protocol) {
    ClientRequest req = h2_request(port, "/tls", protocol);
    req.tls = client_tls_;
    return req;
  }

  testing::TempDir dir_;
  testing::CertFiles files_;
  std::shared_ptr<const TlsContext> client_tls_;
};

TEST_F(Http2ClientTlsTest, AlpnH2CarriesTheStreams) {
  H2Server server(/*auto_reply=*/true, 100, server_tls({"h2"}));
  ClientThread client;
  std::vector<Outcome> out(3);
  std::vector<ClientHandle> handles(3);
  client.run([&] {
    for (int i = 0; i < 3; ++i) {
      handles[i] = client.client().start(tls_request(server.port(), ClientProtocol::kAuto),
                                         out[i].callbacks());
    }
  });
  for (auto& o : out) {
    ASSERT_TRUE(o.wait_done());
    EXPECT_FALSE(o.error) << o.error->message;
    EXPECT_EQ(o.body, "ok /tls");
  }
  EXPECT_EQ(server.connections(), 1);
  client.run([&] { handles.clear(); });
}

TEST_F(Http2ClientTlsTest, AutoFallsBackToHttp1WhenTheUpstreamPicksIt) {
  ServerOptions options;
  TlsServerConfig config;
  config.cert_file = files_.cert;
  config.key_file = files_.key;
  config.alpn = {"http/1.1"};
  options.tls = TlsContext::server(config).value();
  HttpServer server(options, [](std::shared_ptr<ServerStream> s) {
    s->send_simple(200, HttpHeaders{{"Content-Type", "text/plain"}},
                   "http1 " + s->request().target);
  });
  ASSERT_TRUE(server.start().ok());
  ClientThread client;
  for (int round = 0; round < 2; ++round) {
    Outcome o;
    ClientHandle h;
    client.run([&] {
      h = client.client().start(tls_request(server.port(), ClientProtocol::kAuto), o.callbacks());
    });
    ASSERT_TRUE(o.wait_done());
    EXPECT_FALSE(o.error) << o.error->message;
    EXPECT_EQ(o.body, "http1 /tls");
    client.run([&] { h = ClientHandle(); });
  }
  // Forcing HTTP/2 against it is a clear connect error.
  Outcome forced;
  ClientHandle hf;
  client.run([&] {
    hf = client.client().start(tls_request(server.port(), ClientProtocol::kHttp2),
                               forced.callbacks());
  });
  ASSERT_TRUE(forced.wait_done());
  ASSERT_TRUE(forced.error);
  EXPECT_EQ(forced.error->kind, ClientErrorKind::kConnectFailed);
  EXPECT_NE(forced.error->message.find("ALPN"), std::string::npos) << forced.error->message;
  client.run([&] { hf = ClientHandle(); });
  server.stop();
}

}  // namespace
}  // namespace cutline::proto
