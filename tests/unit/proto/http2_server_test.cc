// HttpServer speaking HTTP/2 (h2c with prior knowledge, h2 over TLS by ALPN), driven by a real
// nghttp2 client session (http2_test_client.h) on loopback.

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "cutline/proto/http/http_server.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/tls/tls_context.h"
#include "http2_test_client.h"
#include "net_test_util.h"
#include "tls_test_util.h"

#include "support/wait_for.h"

namespace cutline::proto {
namespace {

using testing::Http2TestClient;
using testing::Notes;

// Streams the handler received, by path, for the test to drive from the server's loop.
struct Received {
  Notes notes;
  std::vector<std::shared_ptr<ServerStream>> streams;
  std::map<std::string, int> closed;  // path -> on_close runs

  size_t count() {
    return notes.read<size_t>([&] { return streams.size(); });
  }
};

ServerOptions one_worker() {
  ServerOptions options;
  options.workers = 1;
  return options;
}

// Runs fn on the server's (single) loop and waits for it.
void on_server_loop(HttpServer& server, const std::function<void()>& fn) {
  server.workers().run_on_all_and_wait([&](EventLoop&) { fn(); });
}

// Sends `total` bytes in 1 KiB chunks, obeying back-pressure: stops when send_body returns false
// and resumes from on_writable. Records what it saw.
struct Producer : std::enable_shared_from_this<Producer> {
  std::shared_ptr<ServerStream> stream;
  size_t total = 0;
  size_t sent = 0;
  Notes* notes = nullptr;
  bool* saw_pushback = nullptr;
  int* writable_calls = nullptr;
  size_t* max_buffered = nullptr;

  void pump() {
    const std::string chunk(1024, 'x');
    while (sent < total) {
      sent += chunk.size();
      const bool more = stream->send_body(chunk);
      notes->update([&] { *max_buffered = std::max(*max_buffered, stream->buffered_bytes()); });
      if (!more) {
        notes->update([&] { *saw_pushback = true; });
        auto self = shared_from_this();
        stream->on_writable([self] {
          self->notes->update([&] { ++*self->writable_calls; });
          self->pump();
        });
        return;
      }
    }
    stream->finish(HttpHeaders{{"cutline-stop", "done"}});
  }
};

TEST(Http2ServerTest, ManyInterleavedStreamsOnOneConnectionEachGetTheirBodyAndTrailers) {
  Received got;
  HttpServer server(one_worker(), [&](std::shared_ptr<ServerStream> s) {
    s->send_head(200,
                 HttpHeaders{{"Content-Type", "text/event-stream"}, {"Trailer", "cutline-stop"}},
                 BodyFraming::chunked());
    got.notes.update([&] { got.streams.push_back(std::move(s)); });
  });
  ASSERT_TRUE(server.start().ok());
  Http2TestClient client(server.port(), {});
  ASSERT_TRUE(client.connected());
  constexpr int kStreams = 40;
  std::vector<int32_t> ids;
  for (int i = 0; i < kStreams; ++i) {
    ids.push_back(client.submit("POST", "/v1/chat/completions?n=" + std::to_string(i),
                                "{\"n\":" + std::to_string(i) + "}"));
  }
  ASSERT_TRUE(client.run_until([&] { return got.count() == kStreams; }));
  // Every stream has its head; now one chunk per stream per round, interleaved.
  for (int i = 0; i < kStreams; ++i)
    EXPECT_EQ(client.response(ids[static_cast<size_t>(i)]).status, 200);
  on_server_loop(server, [&] {
    for (int round = 0; round < 5; ++round) {
      for (auto& s : got.streams) {
        EXPECT_TRUE(
            s->send_body(std::string(s->request().query()) + "/r" + std::to_string(round) + ";"));
      }
    }
    for (auto& s : got.streams) {
      EXPECT_EQ(s->protocol(), "h2");
      EXPECT_EQ(s->request().method, "POST");
      EXPECT_EQ(s->request().headers.get("host"), "localhost");
      EXPECT_TRUE(
          s->finish(HttpHeaders{{"cutline-stop", "stop " + std::string(s->request().query())}}));
    }
  });
  ASSERT_TRUE(client.run_until([&] {
    for (int32_t id : ids) {
      if (!client.response(id).closed) return false;
    }
    return true;
  }));
  for (int i = 0; i < kStreams; ++i) {
    const auto& r = client.response(ids[static_cast<size_t>(i)]);
    const std::string q = "n=" + std::to_string(i);
    EXPECT_EQ(r.body, q + "/r0;" + q + "/r1;" + q + "/r2;" + q + "/r3;" + q + "/r4;");
    EXPECT_TRUE(r.ended);
    EXPECT_EQ(r.error_code, 0u);
    EXPECT_EQ(r.headers.get("content-type"), "text/event-stream");
    EXPECT_EQ(r.trailers.get("cutline-stop"), "stop " + q);
  }
  EXPECT_EQ(server.open_connections(), 1u);
}

TEST(Http2ServerTest, AStreamWhoseClientHoldsItsWindowBlocksOnlyItself) {
  Notes notes;
  bool slow_pushback = false;
  int slow_writable = 0;
  size_t slow_max_buffered = 0;
  bool fast_pushback = false;
  int fast_writable = 0;
  size_t fast_max_buffered = 0;
  constexpr size_t kBytes = 256 * 1024;
  HttpServer server(one_worker(), [&](std::shared_ptr<ServerStream> s) {
    const bool slow = s->request().path() == "/slow";
    s->send_head(200, {}, BodyFraming::chunked());
    auto p = std::make_shared<Producer>();
    p->stream = std::move(s);
    p->total = kBytes;
    p->notes = &notes;
    p->saw_pushback = slow ? &slow_pushback : &fast_pushback;
    p->writable_calls = slow ? &slow_writable : &fast_writable;
    p->max_buffered = slow ? &slow_max_buffered : &fast_max_buffered;
    p->pump();
  });
  ASSERT_TRUE(server.start().ok());
  Http2TestClient::Options options;
  options.manual_windows = true;
  options.initial_window_bytes = 16 * 1024;
  Http2TestClient client(server.port(), options);
  ASSERT_TRUE(client.connected());
  const int32_t slow = client.submit("GET", "/slow");
  client.hold_window(slow);
  std::vector<int32_t> fast;
  for (int i = 0; i < 3; ++i) fast.push_back(client.submit("GET", "/fast"));
  ASSERT_TRUE(client.run_until([&] {
    for (int32_t id : fast) {
      if (!client.response(id).ended) return false;
    }
    return true;
  })) << "the fast streams must complete while the slow one is stalled";
  for (int32_t id : fast) {
    EXPECT_EQ(client.received(id), kBytes);
    EXPECT_EQ(client.response(id).trailers.get("cutline-stop"), "done");
  }
  EXPECT_FALSE(client.response(slow).ended);
  EXPECT_EQ(client.received(slow), 16u * 1024);  // exactly its window
  EXPECT_TRUE(notes.read<bool>([&] { return slow_pushback; }));
  // Only the slow stream's own buffer counts: above the high-water mark, bounded by one chunk.
  EXPECT_GT(notes.read<size_t>([&] { return slow_max_buffered; }),
            ServerOptions{}.high_water_bytes);
  EXPECT_LE(notes.read<size_t>([&] { return slow_max_buffered; }),
            ServerOptions{}.high_water_bytes + 1024);
  // Now the client reads it: on_writable resumes the producer until the end.
  client.open_window(slow);
  ASSERT_TRUE(client.run_until([&] { return client.response(slow).ended; }));
  EXPECT_EQ(client.received(slow), kBytes);
  EXPECT_GE(notes.read<int>([&] { return slow_writable; }), 1);
}

TEST(Http2ServerTest, ClientResetRunsOnCloseAndTheConnectionKeepsServing) {
  Received got;
  HttpServer server(one_worker(), [&](std::shared_ptr<ServerStream> s) {
    if (s->request().path() == "/hello") {
      s->send_simple(200, HttpHeaders{{"Content-Type", "text/plain"}}, "hello");
      return;
    }
    s->send_head(200, {}, BodyFraming::chunked());
    s->send_body("first;");
    const std::string path(s->request().path());
    s->on_close([&got, path] { got.notes.update([&] { ++got.closed[path]; }); });
    got.notes.update([&] { got.streams.push_back(std::move(s)); });
  });
  ASSERT_TRUE(server.start().ok());
  Http2TestClient client(server.port(), {});
  const int32_t a = client.submit("GET", "/a");
  const int32_t b = client.submit("GET", "/b");
  ASSERT_TRUE(client.run_until([&] { return client.received(a) > 0 && client.received(b) > 0; }));
  client.rst(a);
  ASSERT_TRUE(
      client.run_until([&] { return got.notes.read<int>([&] { return got.closed["/a"]; }) == 1; }));
  EXPECT_EQ(got.notes.read<int>([&] { return got.closed["/b"]; }), 0);
  on_server_loop(server, [&] {
    EXPECT_TRUE(got.streams[0]->closed());
    EXPECT_FALSE(got.streams[0]->send_body("late"));
    EXPECT_TRUE(got.streams[1]->send_body("second;"));
    EXPECT_TRUE(got.streams[1]->finish({}));
  });
  ASSERT_TRUE(client.wait_closed(b));
  EXPECT_EQ(client.response(b).body, "first;second;");
  const int32_t c = client.submit("GET", "/hello");
  ASSERT_TRUE(client.wait_closed(c));
  EXPECT_EQ(client.response(c).status, 200);
  EXPECT_EQ(client.response(c).body, "hello");
  EXPECT_EQ(client.response(c).headers.get("content-length"), "5");
}

TEST(Http2ServerTest, ConnectionLossRunsOnCloseForEveryOpenStream) {
  Received got;
  HttpServer server(one_worker(), [&](std::shared_ptr<ServerStream> s) {
    s->send_head(200, {}, BodyFraming::chunked());
    s->on_close([&got] { got.notes.update([&] { ++got.closed["any"]; }); });
    got.notes.update([&] { got.streams.push_back(std::move(s)); });
  });
  ASSERT_TRUE(server.start().ok());
  {
    Http2TestClient client(server.port(), {});
    for (int i = 0; i < 3; ++i) client.submit("GET", "/x");
    ASSERT_TRUE(client.run_until([&] { return got.count() == 3; }));
  }  // the client closes its socket
  EXPECT_TRUE(got.notes.wait_for([&] { return got.closed["any"] == 3; }));
  EXPECT_TRUE(test::wait_for([&] { return server.open_connections() == 0; }));
}

TEST(Http2ServerTest, StopAcceptingSendsGoawayAndOpenStreamsFinish) {
  Received got;
  HttpServer server(one_worker(), [&](std::shared_ptr<ServerStream> s) {
    s->send_head(200, {}, BodyFraming::chunked());
    got.notes.update([&] { got.streams.push_back(std::move(s)); });
  });
  ASSERT_TRUE(server.start().ok());
  Http2TestClient client(server.port(), {});
  const int32_t id = client.submit("GET", "/long");
  ASSERT_TRUE(client.run_until([&] { return got.count() == 1; }));
  server.stop_accepting();
  ASSERT_TRUE(client.run_until([&] { return client.goaway(); }));
  EXPECT_EQ(client.goaway_last_stream_id(), id);
  EXPECT_FALSE(client.response(id).closed);
  // The client opens no new stream on this connection (nghttp2 refuses it locally).
  const int32_t late = client.submit("GET", "/new");
  ASSERT_TRUE(client.run_until([&] { return late < 0 || client.response(late).closed; }));
  EXPECT_EQ(got.count(), 1u);
  on_server_loop(server, [&] {
    EXPECT_TRUE(got.streams[0]->send_body("rest"));
    EXPECT_TRUE(got.streams[0]->finish(HttpHeaders{{"cutline-stop", "x"}}));
  });
  ASSERT_TRUE(client.wait_closed(id));
  EXPECT_EQ(client.response(id).body, "rest");
  EXPECT_EQ(client.response(id).trailers.get("cutline-stop"), "x");
  // With its last stream done, the drained connection closes (the server's side first; it
  // lingers until the client closes its own).
  EXPECT_TRUE(client.run_until([&] { return client.eof(); }));
  client.close();
  EXPECT_TRUE(test::wait_for([&] { return server.open_connections() == 0; }));
}

TEST(Http2ServerTest, H2cWithPriorKnowledgeAndHttp11ShareACleartextPort) {
  HttpServer server(one_worker(), [](std::shared_ptr<ServerStream> s) {
    s->send_simple(200, HttpHeaders{{"Content-Type", "text/plain"}},
                   std::string(s->protocol()) + " " + s->request().method + " " +
                       std::string(s->request().path()) + " " + s->request().body);
  });
  ASSERT_TRUE(server.start().ok());
  Http2TestClient h2(server.port(), {});
  const int32_t id = h2.submit("POST", "/p", "body!");
  ASSERT_TRUE(h2.wait_closed(id));
  EXPECT_EQ(h2.response(id).body, "h2 POST /p body!");

  const int fd = testing::connect_raw(server.port());
  ASSERT_GE(fd, 0);
  const std::string req = "GET /q HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;)
    response.append(buf, static_cast<size_t>(n));
  close(fd);
  EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response;
  EXPECT_NE(response.find("HTTP/1.1 GET /q "), std::string::npos) << response;
}

TEST(Http2ServerTest, WithHttp2OffThePrefaceIsABadHttp11Request) {
  ServerOptions options = one_worker();
  options.http2 = false;
  bool called = false;
  HttpServer server(options, [&](std::shared_ptr<ServerStream> s) {
    called = true;
    s->send_simple(200, {}, "no");
  });
  ASSERT_TRUE(server.start().ok());
  Http2TestClient h2(server.port(), {});
  const int32_t id = h2.submit("GET", "/");
  EXPECT_FALSE(h2.wait_closed(id, 1000));
  EXPECT_TRUE(h2.eof());
  EXPECT_FALSE(called);
}

TEST(Http2ServerTest, OversizedBodiesGet413AndNeverReachTheHandler) {
  ServerOptions options = one_worker();
  options.limits.max_body_bytes = 1000;
  std::atomic<int> handled{0};
  HttpServer server(options, [&](std::shared_ptr<ServerStream> s) {
    ++handled;
    s->send_simple(200, {}, "ok");
  });
  ASSERT_TRUE(server.start().ok());
  Http2TestClient client(server.port(), {});
  const int32_t streamed = client.submit("POST", "/big", std::string(5000, 'a'));
  const int32_t declared = client.submit("POST", "/big", std::string(1500, 'a'),
                                         HttpHeaders{{"Content-Length", "1500"}});
  ASSERT_TRUE(client.wait_closed(streamed));
  ASSERT_TRUE(client.wait_closed(declared));
  for (int32_t id : {streamed, declared}) {
    EXPECT_EQ(client.response(id).status, 413);
    EXPECT_EQ(client.response(id).headers.get("content-type"), "application/json");
    EXPECT_NE(client.response(id).body.find("\"error\""), std::string::npos);
  }
  const int32_t small = client.submit("POST", "/small", std::string(1000, 'a'));
  ASSERT_TRUE(client.wait_closed(small));
  EXPECT_EQ(client.response(small).status, 200);
  EXPECT_EQ(handled.load(), 1);
}

// A body larger than the initial stream and connection windows arrives whole: the server
// reopens its windows as it buffers.
TEST(Http2ServerTest, RequestBodiesLargerThanTheWindowsArriveWhole) {
  ServerOptions options = one_worker();
  options.http2_initial_window_bytes = 64 * 1024;  // connection window: 16 times that
  HttpServer server(options, [](std::shared_ptr<ServerStream> s) {
    s->send_simple(200, {}, std::to_string(s->request().body.size()));
  });
  ASSERT_TRUE(server.start().ok());
  Http2TestClient client(server.port(), {});
  const int32_t a = client.submit("POST", "/a", std::string(3 * 1024 * 1024, 'a'));
  const int32_t b = client.submit("POST", "/b", std::string(300 * 1024, 'b'));
  ASSERT_TRUE(client.wait_closed(a));
  ASSERT_TRUE(client.wait_closed(b));
  EXPECT_EQ(client.response(a).body, std::to_string(3 * 1024 * 1024));
  EXPECT_EQ(client.response(b).body, std::to_string(300 * 1024));
}

TEST(Http2ServerTest, HeadRequestsEndWithTheHeadAndBodyBytesAreDropped) {
  Notes notes;
  std::vector<bool> results;
  HttpServer server(one_worker(), [&](std::shared_ptr<ServerStream> s) {
    std::vector<bool> r;
    r.push_back(s->send_head(200, {}, BodyFraming::chunked()));
    r.push_back(s->send_body("ignored"));
    r.push_back(s->finish(HttpHeaders{{"cutline-stop", "x"}}));
    notes.update([&] { results = r; });
  });
  ASSERT_TRUE(server.start().ok());
  Http2TestClient client(server.port(), {});
  const int32_t id = client.submit("HEAD", "/");
  ASSERT_TRUE(client.wait_closed(id));
  EXPECT_EQ(client.response(id).status, 200);
  EXPECT_TRUE(client.response(id).body.empty());
  EXPECT_TRUE(notes.wait_for([&] { return results.size() == 3; }));
  EXPECT_EQ(results, (std::vector<bool>{true, true, true}));
}

class Http2TlsTest : public ::testing::Test {
 protected:
  static TlsServerConfig config(const testing::CertFiles& files) {
    TlsServerConfig c;
    c.cert_file = files.cert;
    c.key_file = files.key;
    return c;
  }
  void SetUp() override {
    testing::ignore_sigpipe();
    files_ = testing::make_self_signed(dir_, "first", "first");
    auto ctx = TlsContext::server(config(files_));  // default ALPN: h2, http/1.1
    ASSERT_TRUE(ctx.ok()) << ctx.error().message;
    tls_ = ctx.value();
  }
  static void echo_protocol(std::shared_ptr<ServerStream> s) {
    s->send_simple(200, {}, std::string(s->protocol()));
  }
  testing::TempDir dir_;
  testing::CertFiles files_;
  std::shared_ptr<const TlsContext> tls_;
};

TEST_F(Http2TlsTest, AlpnH2SpeaksHttp2AndHttp11ClientsStillWork) {
  ServerOptions options = one_worker();
  options.tls = tls_;
  HttpServer server(options, &echo_protocol);
  ASSERT_TRUE(server.start().ok());
  Http2TestClient::Options o;
  o.tls = true;
  Http2TestClient h2(server.port(), o);
  ASSERT_TRUE(h2.connected());
  EXPECT_EQ(h2.alpn(), "h2");
  const int32_t id = h2.submit("GET", "/");
  ASSERT_TRUE(h2.wait_closed(id)) << "eof " << h2.eof() << " status " << h2.response(id).status;
  EXPECT_EQ(h2.response(id).body, "h2");

  testing::TlsClient::Options http11;
  http11.alpn = {"http/1.1"};
  testing::TlsClient c(server.port(), http11);
  ASSERT_TRUE(c.connected());
  EXPECT_EQ(c.alpn(), "http/1.1");
  c.send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(c.read_all().find("HTTP/1.1"), std::string::npos);
}

TEST_F(Http2TlsTest, WithHttp2OffAlpnNeverSelectsH2) {
  ServerOptions options = one_worker();
  options.tls = tls_;
  options.http2 = false;
  HttpServer server(options, &echo_protocol);
  ASSERT_TRUE(server.start().ok());
  testing::TlsClient::Options both;
  both.alpn = {"h2", "http/1.1"};
  testing::TlsClient c(server.port(), both);
  ASSERT_TRUE(c.connected());
  EXPECT_EQ(c.alpn(), "http/1.1");
}

TEST_F(Http2TlsTest, SetTlsServesNewConnectionsWithTheNewCertificate) {
  ServerOptions options = one_worker();
  options.tls = tls_;
  HttpServer server(options, &echo_protocol);
  ASSERT_TRUE(server.start().ok());
  Http2TestClient::Options o;
  o.tls = true;
  Http2TestClient before(server.port(), o);
  ASSERT_TRUE(before.connected());
  EXPECT_EQ(before.peer_cn(), "first");

  const testing::CertFiles second = testing::make_self_signed(dir_, "second", "second");
  auto ctx = TlsContext::server(config(second));
  ASSERT_TRUE(ctx.ok());
  server.set_tls(ctx.value());
  EXPECT_EQ(server.tls(), ctx.value());
  Http2TestClient after(server.port(), o);
  ASSERT_TRUE(after.connected());
  EXPECT_EQ(after.peer_cn(), "second");
  // The connection made before the reload keeps working.
  const int32_t id = before.submit("GET", "/");
  ASSERT_TRUE(before.wait_closed(id));
  EXPECT_EQ(before.response(id).body, "h2");
}

TEST(Http2ServerTest, IdleTimeoutClosesAConnectionWithoutStreamsOnly) {
  ServerOptions options = one_worker();
  options.idle_timeout_ms = 150;
  Received got;
  HttpServer server(options, [&](std::shared_ptr<ServerStream> s) {
    s->send_head(200, {}, BodyFraming::chunked());
    got.notes.update([&] { got.streams.push_back(std::move(s)); });
  });
  ASSERT_TRUE(server.start().ok());
  Http2TestClient busy(server.port(), {});
  const int32_t id = busy.submit("GET", "/open");
  ASSERT_TRUE(busy.run_until([&] { return got.count() == 1; }));
  Http2TestClient idle(server.port(), {});
  ASSERT_TRUE(idle.run_until([&] { return idle.eof(); }, 3000));
  // Meanwhile (several idle periods) the connection with an open stream stayed.
  EXPECT_FALSE(busy.run_until([&] { return busy.eof(); }, 400));
  on_server_loop(server, [&] { got.streams[0]->finish({}); });
  ASSERT_TRUE(busy.wait_closed(id));
  EXPECT_TRUE(busy.response(id).ended);
}

}  // namespace
}  // namespace cutline::proto
