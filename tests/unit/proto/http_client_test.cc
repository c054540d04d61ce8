#include "cutline/proto/http/http_client.h"

#include <gtest/gtest.h>

#include <thread>

#include "cutline/proto/http/http_fetch.h"
#include "cutline/proto/net/listener.h"
#include "cutline/proto/net/timer.h"
#include "net_test_util.h"

namespace cutline::proto {
namespace {

using testing::ClientThread;
using testing::Notes;
using testing::RawServer;

// The outcome of one request, recorded from the client loop.
struct Outcome {
  Notes notes;
  int status = 0;
  std::vector<std::string> pieces;
  std::string body;
  HttpHeaders trailers;
  bool complete = false;
  std::optional<ClientError> error;
  int outcomes = 0;

  ClientCallbacks callbacks() {
    ClientCallbacks cb;
    cb.on_head = [this](int st, HttpHeaders&) { notes.update([&] { status = st; }); };
    cb.on_body = [this](std::string_view d) {
      notes.update([&] {
        pieces.emplace_back(d);
        body.append(d);
      });
    };
    cb.on_complete = [this](HttpHeaders& t) {
      notes.update([&] {
        trailers = t;
        complete = true;
        ++outcomes;
      });
    };
    cb.on_error = [this](const ClientError& e) {
      notes.update([&] {
        error = e;
        ++outcomes;
      });
    };
    return cb;
  }
  bool wait() {
    return notes.wait_for([this] { return outcomes > 0; });
  }
};

ClientRequest request_to(uint16_t port, std::string target = "/") {
  ClientRequest req;
  req.host = "127.0.0.1";
  req.port = port;
  req.target = std::move(target);
  return req;
}

// A port nobody listens on: bind one, note it, close it.
uint16_t closed_port() {
  RawServer s;
  return s.port();
}

TEST(HttpClientTest, ConnectionRefusedIsAnErrorValue) {
  ClientThread client;
  Outcome out;
  ClientHandle handle;
  const uint16_t port = closed_port();
  client.run([&] { handle = client.client().start(request_to(port), out.callbacks()); });
  ASSERT_TRUE(out.wait());
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->kind, ClientErrorKind::kConnectRefused);
  EXPECT_NE(out.error->message.find(std::to_string(port)), std::string::npos) << out.error->message;
  EXPECT_EQ(out.error->to_error().kind, ErrorKind::kUpstream);
  EXPECT_EQ(to_string(out.error->kind), "connect_refused");
  client.run([&] { handle = ClientHandle(); });
}

TEST(HttpClientTest, UnresolvableHostIsAnErrorValueReportedFromTheLoop) {
  ClientThread client;
  Outcome out;
  ClientHandle handle;
  client.run([&] {
    ClientRequest req = request_to(80);
    req.host = "no-such-host.invalid";
    handle = client.client().start(req, out.callbacks());
    EXPECT_EQ(out.outcomes, 0);  // never inline
  });
  ASSERT_TRUE(out.wait());
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->kind, ClientErrorKind::kResolve);
  client.run([&] { handle = ClientHandle(); });
}

TEST(HttpClientTest, ServerClosingMidBodyIsClosedMidBody) {
  for (const std::string& response :
       {std::string("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789"),
        std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")}) {
    RawServer upstream;
    ClientThread client;
    Outcome out;
    ClientHandle handle;
    client.run(
        [&] { handle = client.client().start(request_to(upstream.port()), out.callbacks()); });
    const int fd = upstream.accept_one();
    ASSERT_GE(fd, 0);
    testing::recv_until(fd, testing::has_head_end);
    testing::send_all(fd, response);
    ASSERT_TRUE(out.notes.wait_for([&] { return !out.body.empty(); }));
    close(fd);
    ASSERT_TRUE(out.wait());
    ASSERT_TRUE(out.error.has_value()) << response;
    EXPECT_EQ(out.error->kind, ClientErrorKind::kClosedMidBody) << out.error->message;
    EXPECT_EQ(out.status, 200);
    EXPECT_FALSE(out.complete);
    client.run([&] { handle = ClientHandle(); });
  }
}

TEST(HttpClientTest, ServerClosingBeforeTheHeadIsClosedBeforeHead) {
  RawServer upstream;
  ClientThread client;
  Outcome out;
  ClientHandle handle;
  client.run([&] { handle = client.client().start(request_to(upstream.port()), out.callbacks()); });
  const int fd = upstream.accept_one();
  testing::recv_until(fd, testing::has_head_end);
  testing::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Le");
  close(fd);
  ASSERT_TRUE(out.wait());
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->kind, ClientErrorKind::kClosedBeforeHead);
  EXPECT_EQ(out.status, 0);
  client.run([&] { handle = ClientHandle(); });
}

TEST(HttpClientTest, BodyUntilCloseCompletesAndMalformedResponseIsParseError) {
  {
    RawServer upstream;
    ClientThread client;
    Outcome out;
    ClientHandle handle;
    client.run(
        [&] { handle = client.client().start(request_to(upstream.port()), out.callbacks()); });
    const int fd = upstream.accept_one();
    testing::recv_until(fd, testing::has_head_end);
    testing::send_all(fd, "HTTP/1.1 200 OK\r\n\r\nall of it");
    close(fd);
    ASSERT_TRUE(out.wait());
    EXPECT_TRUE(out.complete);
    EXPECT_EQ(out.body, "all of it");
    client.run([&] { handle = ClientHandle(); });
  }
  {
    RawServer upstream;
    ClientThread client;
    Outcome out;
    ClientHandle handle;
    client.run(
        [&] { handle = client.client().start(request_to(upstream.port()), out.callbacks()); });
    const int fd = upstream.accept_one();
    testing::recv_until(fd, testing::has_head_end);
    testing::send_all(fd, "HTTP/1.1 2x0 OK\r\n\r\n");
    ASSERT_TRUE(out.wait());
    ASSERT_TRUE(out.error.has_value());
    EXPECT_EQ(out.error->kind, ClientErrorKind::kParse);
    close(fd);
    client.run([&] { handle = ClientHandle(); });
  }
}

TEST(HttpClientTest, RequestIsSentWithHostAndContentLength) {
  RawServer upstream;
  ClientThread client;
  Outcome out;
  ClientHandle handle;
  client.run([&] {
    ClientRequest req = request_to(upstream.port(), "/v1/chat/completions");
    req.method = "POST";
    req.headers.add("Content-Type", "application/json");
    req.headers.add("Transfer-Encoding", "chunked");  // framing is the client's job: dropped
    req.body = "{\"x\":1}";
    handle = client.client().start(req, out.callbacks());
  });
  const int fd = upstream.accept_one();
  const std::string got = testing::recv_until(
      fd, [](const std::string& s) { return s.find("{\"x\":1}") != std::string::npos; });
  EXPECT_EQ(got.rfind("POST /v1/chat/completions HTTP/1.1\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("Host: 127.0.0.1:" + std::to_string(upstream.port()) + "\r\n"),
            std::string::npos);
  EXPECT_NE(got.find("Content-Length: 7\r\n"), std::string::npos);
  EXPECT_EQ(got.find("chunked"), std::string::npos);
  testing::send_all(fd,
                    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  ASSERT_TRUE(out.wait());
  EXPECT_EQ(out.status, 200);  // the interim 100 is skipped
  EXPECT_EQ(out.body, "ok");
  close(fd);
  client.run([&] { handle = ClientHandle(); });
}

// The chunks of one read arrive as one body piece (a streaming relay writes once per read, not
// once per token); a pause stops delivery from the next read on, even when its bytes are already
// buffered; resuming delivers them, again as one piece.
TEST(HttpClientTest, PauseStopsDeliveryAndResumeDeliversBufferedBytes) {
  RawServer upstream;
  ClientThread client;
  Outcome out;
  ClientHandle handle;
  client.run([&] {
    ClientCallbacks cb = out.callbacks();
    auto inner = std::move(cb.on_body);
    cb.on_body = [&, inner](std::string_view d) {
      inner(d);
      handle.pause();
    };
    handle = client.client().start(request_to(upstream.port()), std::move(cb));
  });
  const int fd = upstream.accept_one();
  testing::recv_until(fd, testing::has_head_end);
  testing::send_all(fd,
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "1\r\na\r\n2\r\nbc\r\n");
  ASSERT_TRUE(out.notes.wait_for([&] { return out.pieces.size() == 1; }));
  EXPECT_EQ(out.notes.read<std::string>([&] { return out.pieces[0]; }), "abc");
  // Paused: the next read's chunks stay in the kernel and the input buffer.
  testing::send_all(fd, "1\r\nd\r\n1\r\ne\r\n0\r\n\r\n");
  for (int i = 0; i < 3; ++i) client.run([] {});
  EXPECT_EQ(out.notes.read<size_t>([&] { return out.pieces.size(); }), 1u);
  EXPECT_FALSE(out.notes.read<bool>([&] { return out.complete; }));
  client.run([&] { handle.resume(); });
  ASSERT_TRUE(out.wait());
  EXPECT_TRUE(out.complete);
  EXPECT_EQ(out.body, "abcde");
  ASSERT_EQ(out.pieces.size(), 2u);
  EXPECT_EQ(out.pieces[1], "de");
  close(fd);
  client.run([&] { handle = ClientHandle(); });
}

// The upstream closes a keep-alive connection right after its response; the next request,
// started at once on the pooled connection, is retried on a fresh one.
TEST(HttpClientTest, StalePooledConnectionIsRetriedOnce) {
  RawServer upstream;
  ClientThread client;
  Outcome first;
  Outcome second;
  ClientHandle h1;
  ClientHandle h2;
  std::thread server([&] {
    const int fd = upstream.accept_one();
    testing::recv_until(fd, testing::has_head_end);
    testing::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1");
    close(fd);
    const int fd2 = upstream.accept_one();
    testing::recv_until(fd2, testing::has_head_end);
    testing::send_all(fd2, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2");
    close(fd2);
  });
  client.run([&] {
    ClientCallbacks cb = first.callbacks();
    auto inner = std::move(cb.on_complete);
    cb.on_complete = [&, inner](HttpHeaders& t) {
      inner(t);
      h2 = client.client().start(request_to(upstream.port()), second.callbacks());
    };
    h1 = client.client().start(request_to(upstream.port()), std::move(cb));
  });
  ASSERT_TRUE(second.wait());
  server.join();
  EXPECT_TRUE(first.complete);
  EXPECT_TRUE(second.complete) << (second.error ? second.error->message : "");
  EXPECT_EQ(second.body, "2");
  client.run([&] {
    EXPECT_EQ(client.client().connections_opened(), 2u);
    h1 = ClientHandle();
    h2 = ClientHandle();
  });
}

TEST(HttpClientTest, DestroyingTheClientEndsActiveRequestsSilently) {
  RawServer upstream;
  auto client = std::make_unique<ClientThread>();
  Outcome out;
  ClientHandle handle;
  client->run(
      [&] { handle = client->client().start(request_to(upstream.port()), out.callbacks()); });
  const int fd = upstream.accept_one();
  client->run([&] { EXPECT_TRUE(handle.active()); });
  client.reset();  // destroys the HttpClient on its loop
  EXPECT_FALSE(handle.active());
  EXPECT_EQ(out.outcomes, 0);
  // The upstream sees the connection go away: the request, then EOF.
  const std::string got = testing::recv_all(fd, 10000);
  EXPECT_EQ(got.rfind("GET / HTTP/1.1\r\n", 0), 0u);
  EXPECT_TRUE(testing::has_head_end(got));
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 0), 1);
  char c;
  EXPECT_EQ(recv(fd, &c, 1, 0), 0);  // EOF, not a timeout
  close(fd);
}

TEST(HttpFetchTest, ParsesUrls) {
  Result<HttpUrl> u = parse_http_url("http://127.0.0.1:8080/v1/models?x=1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->target, "/v1/models?x=1");
  u = parse_http_url("http://[::1]/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 80);
  u = parse_http_url("http://example");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->target, "/");
  EXPECT_FALSE(parse_http_url("https://x/").ok());
  EXPECT_FALSE(parse_http_url("http://x:99999/").ok());
  EXPECT_FALSE(parse_http_url("http:///path").ok());
}

TEST(HttpFetchTest, RefusedAndTimeoutAreErrors) {
  Result<HttpResponse> r = http_fetch("http://127.0.0.1:" + std::to_string(closed_port()) + "/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kUpstream);
  EXPECT_NE(r.error().message.find("connect_refused"), std::string::npos);

  RawServer silent;  // accepts (backlog) but never answers
  r = http_fetch("http://127.0.0.1:" + std::to_string(silent.port()) + "/", "GET", {}, {}, 50);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kTimeout);
}

}  // namespace
}  // namespace cutline::proto

namespace cutline::proto {
namespace {

// A listener whose accept queue is full drops new SYNs, so a connect hangs: the connect timeout
// must turn that into an error value.
TEST(HttpClientTimeoutTest, ConnectTimeoutIsAnErrorValue) {
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(lfd, 0), 0);
  socklen_t len = sizeof(addr);
  getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  const uint16_t port = ntohs(addr.sin_port);
  // Fill the accept queue (never accepted).
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    fillers.push_back(fd);
  }
  WorkerThreads loop(1);
  loop.start();
  std::unique_ptr<HttpClient> client;
  testing::Notes notes;
  std::optional<ClientError> error;
  ClientHandle handle;
  loop.run_on_all_and_wait([&](EventLoop& l) {
    ClientOptions options;
    options.connect_timeout_ms = 100;
    client = std::make_unique<HttpClient>(l, options);
    ClientCallbacks cb;
    cb.on_error = [&](const ClientError& e) { notes.update([&] { error = e; }); };
    cb.on_complete = [&](HttpHeaders&) { notes.update([&] { error = ClientError{}; }); };
    ClientRequest req;
    req.host = "127.0.0.1";
    req.port = port;
    handle = client->start(req, std::move(cb));
  });
  ASSERT_TRUE(notes.wait_for([&] { return error.has_value(); }));
  // Where the kernel refuses instead of dropping, the error is still a value, just another kind.
  EXPECT_TRUE(error->kind == ClientErrorKind::kConnectTimeout ||
              error->kind == ClientErrorKind::kClosedBeforeHead)
      << to_string(error->kind) << ": " << error->message;
  if (error->kind == ClientErrorKind::kConnectTimeout) {
    EXPECT_EQ(error->to_error().kind, ErrorKind::kTimeout);
  }
  loop.run_on_all_and_wait([&](EventLoop&) {
    handle = ClientHandle();
    client.reset();
  });
  loop.stop();
  for (int fd : fillers) close(fd);
  close(lfd);
}

TEST(ListenerTest, PortZeroIsReportedAndSharedThroughReusePort) {
  EventLoop loop;
  int accepted = 0;
  auto first = Listener::open(loop, "127.0.0.1", 0, 16, [&](int fd) {
    ++accepted;
    close(fd);
  });
  ASSERT_TRUE(first.ok()) << first.error().message;
  const uint16_t port = (*first)->port();
  ASSERT_NE(port, 0);
  auto second = Listener::open(loop, "127.0.0.1", port, 16, [&](int fd) {
    ++accepted;
    close(fd);
  });
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ((*second)->port(), port);
  auto bad = Listener::open(loop, "not-an-ip", 0, 16, [](int) {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::kIo);
  // A plain socket (no SO_REUSEPORT) cannot take the port: it is really bound.
  const int plain = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_NE(bind(plain, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(plain);
  // Connections arrive through the loop.
  const int fd = testing::connect_raw(port);
  ASSERT_GE(fd, 0);
  Timer stop(loop, [&] {
    if (accepted > 0) loop.stop();
  });
  stop.arm_periodic(1);
  loop.run();
  EXPECT_EQ(accepted, 1);
  close(fd);
}

}  // namespace
}  // namespace cutline::proto
