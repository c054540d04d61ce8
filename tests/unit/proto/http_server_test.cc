#include "cutline/proto/http/http_server.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <atomic>

#include "cutline/proto/http/http_fetch.h"
#include "cutline/proto/net/event_loop.h"
#include "net_test_util.h"

namespace cutline::proto {
namespace {

using testing::ClientThread;
using testing::Notes;

ServerOptions test_options() {
  ServerOptions options;
  options.workers = 2;
  return options;
}

TEST(HttpServerTest, AnswersARequestWithItsParsedFields) {
  HttpServer server(test_options(), [](std::shared_ptr<ServerStream> s) {
    HttpRequest& r = s->request();
    const std::string body =
        r.method + " " + std::string(r.path()) + " q=" + std::string(r.query()) +
        " ua=" + std::string(r.headers.get("x-test").value_or("")) + " body=" + r.body;
    s->send_simple(201, HttpHeaders{{"Content-Type", "text/plain"}}, body);
  });
  ASSERT_TRUE(server.start().ok());
  ASSERT_NE(server.port(), 0);
  Result<HttpResponse> res =
      http_fetch("http://127.0.0.1:" + std::to_string(server.port()) + "/echo?x=1", "POST",
                 HttpHeaders{{"X-Test", "yes"}}, "payload");
  ASSERT_TRUE(res.ok()) << res.error().message;
  EXPECT_EQ(res->status, 201);
  EXPECT_EQ(res->headers.get("content-type"), "text/plain");
  EXPECT_EQ(res->body, "POST /echo q=x=1 ua=yes body=payload");
}

// The handler sends one chunk per client acknowledgement, so the client must see each chunk on
// its own, before the next exists: streaming, not buffering.
TEST(HttpServerTest, ChunkedStreamIsReadChunkByChunkWithTrailers) {
  std::shared_ptr<ServerStream> stream;
  std::atomic<int> sent{0};
  std::atomic<EventLoop*> stream_loop{nullptr};
  HttpServer server(test_options(), [&](std::shared_ptr<ServerStream> s) {
    stream_loop = &s->loop();
    s->send_head(200,
                 HttpHeaders{{"Content-Type", "text/event-stream"}, {"Trailer", "cutline-stop"}},
                 BodyFraming::chunked());
    s->send_body("chunk0;");
    sent = 1;
    stream = std::move(s);
  });
  ASSERT_TRUE(server.start().ok());

  ClientThread client;
  Notes notes;
  std::vector<std::string> pieces;
  HttpHeaders trailers;
  bool complete = false;
  int status = 0;
  std::string trailer_announced;
  ClientHandle handle;
  client.run([&] {
    ClientRequest req;
    req.host = "127.0.0.1";
    req.port = server.port();
    req.target = "/stream";
    ClientCallbacks cb;
    cb.on_head = [&](int st, HttpHeaders& h) {
      notes.update([&] {
        status = st;
        trailer_announced = std::string(h.get("trailer").value_or(""));
      });
    };
    cb.on_body = [&](std::string_view data) {
      notes.update([&] { pieces.emplace_back(data); });
      // Ask the server for the next chunk (on whichever worker owns the stream).
      {
        stream_loop.load()->post([&] {
          if (!stream || stream->finished()) return;
          const int n = sent.load();
          if (n < 5) {
            stream->send_body("chunk" + std::to_string(n) + ";");
            sent = n + 1;
          } else {
            stream->finish(HttpHeaders{{"cutline-stop", "{\"cause\":\"eos\"}"}});
          }
        });
      }
    };
    cb.on_complete = [&](HttpHeaders& t) {
      notes.update([&] {
        trailers = t;
        complete = true;
      });
    };
    cb.on_error = [&](const ClientError& e) { ADD_FAILURE() << e.message; };
    handle = client.client().start(req, std::move(cb));
  });
  ASSERT_TRUE(notes.wait_for([&] { return complete; }));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(trailer_announced, "cutline-stop");
  ASSERT_EQ(pieces.size(), 5u);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(pieces[static_cast<size_t>(i)], "chunk" + std::to_string(i) + ";");
  EXPECT_EQ(trailers.get("cutline-stop"), "{\"cause\":\"eos\"}");
  client.run([&] { handle = ClientHandle(); });
  server.stop();
}

TEST(HttpServerTest, ClientDisconnectFiresOnCloseExactlyOnce) {
  Notes notes;
  int closes = 0;
  std::shared_ptr<ServerStream> stream;
  HttpServer server(test_options(), [&](std::shared_ptr<ServerStream> s) {
    s->send_head(200, {}, BodyFraming::chunked());
    s->send_body("first");
    s->on_close([&, raw = s.get()] {
      notes.update([&] { ++closes; });
      EXPECT_TRUE(raw->closed());
      EXPECT_FALSE(raw->send_body("after close"));
    });
    stream = std::move(s);
  });
  ASSERT_TRUE(server.start().ok());
  const int fd = testing::connect_raw(server.port());
  ASSERT_GE(fd, 0);
  testing::send_all(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string got = testing::recv_until(
      fd, [](const std::string& s) { return s.find("first") != std::string::npos; });
  ASSERT_NE(got.find("first"), std::string::npos);
  close(fd);
  ASSERT_TRUE(notes.wait_for([&] { return closes == 1; }));
  // A late registration after the close does not run the callback twice.
  server.workers().run_on_all_and_wait([&](EventLoop& loop) {
    if (stream && &stream->loop() == &loop) {
      stream->on_close([&] { notes.update([&] { ++closes; }); });
      EXPECT_FALSE(stream->finish({}));
    }
  });
  EXPECT_EQ(notes.read<int>([&] { return closes; }), 1);
  server.stop();
}

TEST(HttpServerTest, ClientCancelClosesTheUpstreamConnection) {
  Notes notes;
  bool server_saw_close = false;
  std::shared_ptr<ServerStream> stream;
  HttpServer server(test_options(), [&](std::shared_ptr<ServerStream> s) {
    s->send_head(200, {}, BodyFraming::chunked());
    s->send_body("token");
    s->on_close([&] { notes.update([&] { server_saw_close = true; }); });
    stream = std::move(s);
  });
  ASSERT_TRUE(server.start().ok());
  ClientThread client;
  int callbacks_after_cancel = 0;
  bool cancelled = false;
  ClientHandle handle;
  client.run([&] {
    ClientRequest req;
    req.host = "127.0.0.1";
    req.port = server.port();
    ClientCallbacks cb;
    cb.on_body = [&](std::string_view) {
      if (cancelled) ++callbacks_after_cancel;
      handle.cancel();
      cancelled = true;
      EXPECT_FALSE(handle.active());
    };
    cb.on_complete = [&](HttpHeaders&) { ++callbacks_after_cancel; };
    cb.on_error = [&](const ClientError&) { ++callbacks_after_cancel; };
    handle = client.client().start(req, std::move(cb));
  });
  ASSERT_TRUE(notes.wait_for([&] { return server_saw_close; }));
  client.run([&] {
    EXPECT_TRUE(cancelled);
    EXPECT_EQ(callbacks_after_cancel, 0);
    EXPECT_EQ(client.client().idle_connections(), 0u);  // never pooled
  });
  server.stop();
}

// The client pauses after the first body piece; the server's producer must stop when send_body
// reports high water, keep the connection's buffered output bounded, and resume on drain.
TEST(HttpServerTest, BackPressureBoundsServerBufferingAndResumesOnDrain) {
  constexpr size_t kChunk = 16 * 1024;
  constexpr size_t kTotal = 32 * 1024 * 1024;
  ServerOptions options = test_options();
  options.high_water_bytes = 64 * 1024;
  options.low_water_bytes = 16 * 1024;
  Notes notes;
  size_t produced = 0;
  size_t max_buffered = 0;
  int high_water_reports = 0;
  bool producer_waiting = false;
  size_t buffered_while_waiting = 0;
  std::shared_ptr<ServerStream> stream;
  std::function<void()> produce;
  const std::string chunk(kChunk, 'x');
  HttpServer server(options, [&](std::shared_ptr<ServerStream> s) {
    stream = s;
    s->send_head(200, {}, BodyFraming::length(kTotal));
    produce = [&] {
      bool go_on = true;
      while (go_on) {
        size_t done;
        notes.update([&] { done = produced; });
        if (done == kTotal) {
          stream->finish({});
          return;
        }
        go_on = stream->send_body(chunk);
        notes.update([&] {
          produced += kChunk;
          max_buffered = std::max(max_buffered, stream->buffered_bytes());
          if (!go_on) {
            ++high_water_reports;
            producer_waiting = true;
            buffered_while_waiting = stream->buffered_bytes();
          }
        });
      }
    };
    s->on_writable([&] {
      notes.update([&] {
        producer_waiting = false;
        buffered_while_waiting = stream->buffered_bytes();
      });
      produce();
    });
    produce();
  });
  ASSERT_TRUE(server.start().ok());

  ClientThread client;
  size_t received = 0;
  bool complete = false;
  ClientHandle handle;
  client.run([&] {
    ClientRequest req;
    req.host = "127.0.0.1";
    req.port = server.port();
    ClientCallbacks cb;
    cb.on_body = [&](std::string_view data) {
      notes.update([&] { received += data.size(); });
      if (received == data.size()) handle.pause();  // first piece: stop reading
    };
    cb.on_complete = [&](HttpHeaders&) { notes.update([&] { complete = true; }); };
    cb.on_error = [&](const ClientError& e) { ADD_FAILURE() << e.message; };
    handle = client.client().start(req, std::move(cb));
  });
  // The kernel buffers fill, then the connection's own buffer rises above the low-water mark
  // and the producer waits: back-pressure reached it.
  ASSERT_TRUE(notes.wait_for(
      [&] {
        return received > 0 && producer_waiting && buffered_while_waiting > options.low_water_bytes;
      },
      10000));
  const size_t received_while_paused = notes.read<size_t>([&] { return received; });
  const size_t produced_while_paused = notes.read<size_t>([&] { return produced; });
  EXPECT_LT(produced_while_paused, kTotal);
  EXPECT_LT(received_while_paused, 1024 * 1024u);
  client.run([&] { handle.resume(); });
  ASSERT_TRUE(notes.wait_for([&] { return complete; }, 20000))
      << "received " << notes.read<size_t>([&] { return received; }) << " produced "
      << notes.read<size_t>([&] { return produced; });
  EXPECT_EQ(received, kTotal);
  EXPECT_GT(high_water_reports, 1);
  // Never more than the high-water mark plus the one chunk that crossed it.
  EXPECT_LE(max_buffered, options.high_water_bytes + kChunk);
  client.run([&] { handle = ClientHandle(); });
  server.stop();
}

TEST(HttpServerTest, OversizedHeadIs431AndBodyIs413WithJsonError) {
  ServerOptions options = test_options();
  options.limits.max_header_bytes = 1024;
  options.limits.max_body_bytes = 100;
  bool handler_called = false;
  HttpServer server(options, [&](std::shared_ptr<ServerStream> s) {
    handler_called = true;
    s->send_simple(200, {}, "");
  });
  ASSERT_TRUE(server.start().ok());

  struct Case {
    std::string request;
    int status;
    std::string code;
  };
  const std::vector<Case> cases = {
      {"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n", 431,
       "headers_too_large"},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'b'), 413,
       "too_large"},
      {"GARBAGE\r\n\r\n", 400, "bad_request"},
  };
  for (const auto& c : cases) {
    const int fd = testing::connect_raw(server.port());
    ASSERT_GE(fd, 0);
    testing::send_all(fd, c.request);
    const std::string response = testing::recv_all(fd);  // the server closes after answering
    close(fd);
    ASSERT_EQ(response.rfind("HTTP/1.1 " + std::to_string(c.status), 0), 0u) << response;
    const std::string body = response.substr(response.find("\r\n\r\n") + 4);
    simdjson::dom::parser json;
    simdjson::dom::element doc;
    ASSERT_EQ(json.parse(body).get(doc), simdjson::SUCCESS) << body;
    EXPECT_EQ(std::string_view(doc["error"]["type"]), "invalid_request_error");
    EXPECT_EQ(std::string_view(doc["error"]["code"]), c.code);
    EXPECT_FALSE(std::string_view(doc["error"]["message"]).empty());
  }
  EXPECT_FALSE(handler_called);
  server.stop();
}

TEST(HttpServerTest, KeepAliveReusesOneConnectionAndPipeliningKeepsOrder) {
  HttpServer server(test_options(), [](std::shared_ptr<ServerStream> s) {
    s->send_simple(200, {}, std::string(s->request().path()));
  });
  ASSERT_TRUE(server.start().ok());
  ClientThread client;
  Notes notes;
  std::vector<std::string> bodies;
  std::function<void(int)> next;
  std::vector<ClientHandle> handles;
  next = [&](int i) {
    ClientRequest req;
    req.host = "127.0.0.1";
    req.port = server.port();
    req.target = "/r" + std::to_string(i);
    ClientCallbacks cb;
    auto body = std::make_shared<std::string>();
    cb.on_body = [body](std::string_view d) { body->append(d); };
    cb.on_complete = [&, body, i](HttpHeaders&) {
      notes.update([&] { bodies.push_back(*body); });
      if (i < 2) next(i + 1);
    };
    cb.on_error = [](const ClientError& e) { ADD_FAILURE() << e.message; };
    handles.push_back(client.client().start(req, std::move(cb)));
  };
  client.run([&] { next(0); });
  ASSERT_TRUE(notes.wait_for([&] { return bodies.size() == 3; }));
  EXPECT_EQ(bodies, (std::vector<std::string>{"/r0", "/r1", "/r2"}));
  client.run([&] {
    EXPECT_EQ(client.client().connections_opened(), 1u);
    EXPECT_EQ(client.client().idle_connections(), 1u);
    handles.clear();
  });
  EXPECT_EQ(server.open_connections(), 1u);

  // Two pipelined requests in one write: two responses, in order, on one connection.
  const int fd = testing::connect_raw(server.port());
  testing::send_all(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string got = testing::recv_until(
      fd, [](const std::string& s) { return s.find("/b") != std::string::npos; });
  close(fd);
  const size_t a = got.find("\r\n\r\n/a");
  const size_t b = got.find("\r\n\r\n/b");
  ASSERT_NE(a, std::string::npos) << got;
  ASSERT_NE(b, std::string::npos) << got;
  EXPECT_LT(a, b);
  server.stop();
}

TEST(HttpServerTest, Http10ClientGetsUntilCloseInsteadOfChunked) {
  HttpServer server(test_options(), [](std::shared_ptr<ServerStream> s) {
    EXPECT_EQ(s->protocol(), "HTTP/1.0");
    s->send_head(200, {}, BodyFraming::chunked());
    s->send_body("hello ");
    s->send_body("world");
    s->finish(HttpHeaders{{"dropped", "1"}});
  });
  ASSERT_TRUE(server.start().ok());
  const int fd = testing::connect_raw(server.port());
  testing::send_all(fd, "GET / HTTP/1.0\r\n\r\n");
  const std::string got = testing::recv_all(fd);
  close(fd);
  EXPECT_EQ(got.find("chunked"), std::string::npos) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), "hello world");
}

TEST(HttpServerTest, StopClosesOpenStreamsWithOnClose) {
  Notes notes;
  int closes = 0;
  bool head_seen = false;
  HttpServer server(test_options(), [&](std::shared_ptr<ServerStream> s) {
    s->send_head(200, {}, BodyFraming::chunked());
    s->on_close([&, s] { notes.update([&] { ++closes; }); });
    notes.update([&] { head_seen = true; });
  });
  ASSERT_TRUE(server.start().ok());
  const int fd = testing::connect_raw(server.port());
  testing::send_all(fd, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_TRUE(notes.wait_for([&] { return head_seen; }));
  server.stop();
  EXPECT_EQ(closes, 1);
  EXPECT_EQ(server.open_connections(), 0u);
  close(fd);
}

}  // namespace
}  // namespace cutline::proto

namespace cutline::proto {
namespace {

// ServerOptions::on_protocol_error (added for the gateway) may decorate the server's own answer.
TEST(HttpServerHooksTest, ProtocolErrorHookAddsHeadersAndReplacesTheBody) {
  ServerOptions options;
  options.limits.max_header_count = 2;
  std::string seen_target;
  options.on_protocol_error = [&](const HttpRequest& request, const Error& error,
                                  HttpHeaders& headers, std::string& body) {
    seen_target = request.target;
    headers.add("Cutline-Stop", "{\"cause\":\"admission_rejected\"}");
    body = "{\"replaced\":\"" + std::string(to_string(error.kind)) + "\"}";
  };
  HttpServer server(options, [](std::shared_ptr<ServerStream> s) { s->send_simple(200, {}, ""); });
  ASSERT_TRUE(server.start().ok());
  const int fd = testing::connect_raw(server.port());
  testing::send_all(fd, "GET /x HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n");
  const std::string got = testing::recv_all(fd);
  close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 431 ", 0), 0u) << got;
  EXPECT_NE(got.find("Cutline-Stop: {\"cause\":\"admission_rejected\"}\r\n"), std::string::npos);
  EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), "{\"replaced\":\"headers_too_large\"}");
  server.stop();
}

TEST(HttpServerHooksTest, StopAcceptingRefusesNewConnectionsAndKeepsOpenOnes) {
  Notes notes;
  std::shared_ptr<ServerStream> held;
  HttpServer server(ServerOptions{}, [&](std::shared_ptr<ServerStream> s) {
    s->send_head(200, {}, BodyFraming::chunked());
    notes.update([&] { held = s; });
  });
  ASSERT_TRUE(server.start().ok());
  const int fd = testing::connect_raw(server.port());
  testing::send_all(fd, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_TRUE(notes.wait_for([&] { return held != nullptr; }));
  server.stop_accepting();
  EXPECT_LT(testing::connect_raw(server.port()), 0);  // refused
  server.workers().run_on_all_and_wait([&](EventLoop& loop) {
    if (&held->loop() == &loop) {
      held->send_body("still here");
      held->finish({});
    }
  });
  const std::string got = testing::recv_until(
      fd, [](const std::string& s) { return s.find("0\r\n\r\n") != std::string::npos; });
  EXPECT_NE(got.find("still here"), std::string::npos);
  close(fd);
  server.stop();
}

}  // namespace
}  // namespace cutline::proto
