// What a client with no key can cost the server: request deadlines that trickled bytes do not
// extend, the process-wide connection cap and request-memory budget, and the per-HTTP/2-connection
// caps on unfinished streams and buffered bytes.
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cutline/proto/http/http_server.h"
#include "http2_test_client.h"
#include "net_test_util.h"

#include "support/wait_for.h"

namespace cutline::proto {
namespace {

using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// Sends `trickle` one byte every `gap_ms` until the server answers or closes; returns what it
// answered (empty if it never did within `limit_ms`).
std::string trickle_until_answer(int fd, const std::string& trickle, int gap_ms, int limit_ms) {
  const auto start = Clock::now();
  std::string got;
  size_t i = 0;
  while (ms_since(start) < limit_ms) {
    if (i < trickle.size()) testing::send_all(fd, trickle.substr(i++, 1));
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, gap_ms) > 0) {
      char buf[4096];
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
      if (testing::has_head_end(got)) break;
    }
  }
  return got;
}

ServerOptions quick_options() {
  ServerOptions o;
  o.request_header_timeout_ms = 400;
  o.request_body_timeout_ms = 400;
  return o;
}

TEST(ServerLimitsTest, Http1SlowHeadIsCutAtTheHeaderDeadlineNotKeptAliveByEachByte) {
  std::atomic<int> handled{0};
  HttpServer server(quick_options(), [&](std::shared_ptr<ServerStream> s) {
    ++handled;
    s->send_simple(200, {}, "ok");
  });
  ASSERT_TRUE(server.start().ok());
  const int fd = testing::connect_raw(server.port());
  const auto start = Clock::now();
  // A byte every 50 ms: far inside the 60 s idle timeout, never a complete head.
  const std::string answer = trickle_until_answer(
      fd, "GET / HTTP/1.1\r\nHost: a\r\nX-Slow: " + std::string(500, 'a'), 50, 4000);
  const int64_t elapsed = ms_since(start);
  close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_NE(answer.find("request_timeout"), std::string::npos) << answer;
  EXPECT_GE(elapsed, 350);
  EXPECT_LT(elapsed, 2500);
  EXPECT_EQ(handled.load(), 0);
}

TEST(ServerLimitsTest, Http1SlowBodyIsCutAtTheBodyDeadline) {
  std::atomic<int> handled{0};
  HttpServer server(quick_options(), [&](std::shared_ptr<ServerStream> s) {
    ++handled;
    s->send_simple(200, {}, "ok");
  });
  ASSERT_TRUE(server.start().ok());
  const int fd = testing::connect_raw(server.port());
  testing::send_all(fd, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n");
  const auto start = Clock::now();
  const std::string answer = trickle_until_answer(fd, std::string(1000, 'b'), 50, 4000);
  const int64_t elapsed = ms_since(start);
  close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_NE(answer.find("request body"), std::string::npos) << answer;
  EXPECT_LT(elapsed, 2500);
  EXPECT_EQ(handled.load(), 0);
}

TEST(ServerLimitsTest, AKeepAliveConnectionWaitsForItsNextRequestUnderTheIdleTimeoutOnly) {
  HttpServer server(quick_options(),
                    [](std::shared_ptr<ServerStream> s) { s->send_simple(200, {}, "ok"); });
  ASSERT_TRUE(server.start().ok());
  const int fd = testing::connect_raw(server.port());
  testing::send_all(fd, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  std::string first = testing::recv_until(
      fd, [](const std::string& s) { return s.find("\r\n\r\nok") != std::string::npos; });
  ASSERT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
  // Quiet for longer than the head deadline: a keep-alive wait, not a slow head.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  testing::send_all(fd, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  std::string second = testing::recv_until(
      fd, [](const std::string& s) { return s.find("\r\n\r\nok") != std::string::npos; });
  close(fd);
  EXPECT_EQ(second.rfind("HTTP/1.1 200", 0), 0u) << second;
}

TEST(ServerLimitsTest, PastTheConnectionCapANewConnectionGets503AndIsCounted) {
  ServerOptions o;
  o.max_connections = 2;
  std::atomic<int> refused{0};
  o.on_refused = [&](std::string_view reason) {
    if (reason == "connections") ++refused;
  };
  HttpServer server(o, [](std::shared_ptr<ServerStream> s) { s->send_simple(200, {}, "ok"); });
  ASSERT_TRUE(server.start().ok());
  const int a = testing::connect_raw(server.port());
  const int b = testing::connect_raw(server.port());
  ASSERT_TRUE(test::wait_for([&] { return server.open_connections() == 2; }));
  const int c = testing::connect_raw(server.port());
  const std::string answer = testing::recv_all(c);  // the server closes after answering
  close(c);
  EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
  EXPECT_NE(answer.find("too_many_connections"), std::string::npos) << answer;
  EXPECT_EQ(refused.load(), 1);
  EXPECT_EQ(server.budget().refused_connections(), 1u);
  // The connections already open are served as before.
  testing::send_all(a, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(testing::recv_until(a, testing::has_head_end).rfind("HTTP/1.1 200", 0), 0u);
  close(a);
  close(b);
  ASSERT_TRUE(test::wait_for([&] { return server.budget().connections() == 0; }));
  const int d = testing::connect_raw(server.port());
  testing::send_all(d, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_EQ(testing::recv_until(d, testing::has_head_end).rfind("HTTP/1.1 200", 0), 0u);
  close(d);
}

TEST(ServerLimitsTest, PastTheMemoryBudgetANewRequestGets503AtOnceAndTheRunningOneFinishes) {
  ServerOptions o;
  o.max_request_memory_bytes = 1000;
  HttpServer server(o, [](std::shared_ptr<ServerStream> s) {
    s->send_simple(200, {}, "got " + std::to_string(s->request().body.size()));
  });
  ASSERT_TRUE(server.start().ok());
  const int running = testing::connect_raw(server.port());
  testing::send_all(
      running, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 800\r\n\r\n" + std::string(400, 'x'));
  ASSERT_TRUE(test::wait_for([&] { return server.budget().request_bytes() == 800; }));
  const int late = testing::connect_raw(server.port());
  const auto start = Clock::now();
  testing::send_all(late, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 300\r\n\r\n");
  const std::string refused = testing::recv_all(late);
  close(late);
  EXPECT_LT(ms_since(start), 1000);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  // A chunked body is charged as it arrives.
  const int chunked = testing::connect_raw(server.port());
  testing::send_all(chunked,
                    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n12c\r\n" +
                        std::string(300, 'y') + "\r\n0\r\n\r\n");
  EXPECT_EQ(testing::recv_all(chunked).rfind("HTTP/1.1 503", 0), 0u);
  close(chunked);
  testing::send_all(running, std::string(400, 'x'));
  const std::string done = testing::recv_until(
      running, [](const std::string& s) { return s.find("got 800") != std::string::npos; });
  close(running);
  EXPECT_EQ(done.rfind("HTTP/1.1 200", 0), 0u) << done;
  ASSERT_TRUE(test::wait_for([&] { return server.budget().request_bytes() == 0; }));
  EXPECT_EQ(server.budget().refused_requests(), 2u);
}

TEST(ServerLimitsTest, Http2StreamsStillArrivingAreCutAtTheirDeadlines) {
  std::atomic<int> handled{0};
  HttpServer server(quick_options(), [&](std::shared_ptr<ServerStream> s) {
    ++handled;
    s->send_simple(200, {}, "ok");
  });
  ASSERT_TRUE(server.start().ok());
  testing::Http2TestClient client(server.port(), {});
  ASSERT_TRUE(client.connected());
  const int32_t slow = client.submit_open("POST", "/slow");
  const auto start = Clock::now();
  // A byte of body every 50 ms: the body deadline still ends it.
  ASSERT_TRUE(client.run_until(
      [&] {
        if (client.response(slow).closed) return true;
        client.send_more(slow, "z");
        return false;
      },
      3000));
  EXPECT_LT(ms_since(start), 2500);
  EXPECT_EQ(client.response(slow).status, 408);
  EXPECT_EQ(handled.load(), 0);
  // The connection itself serves on.
  const int32_t ok = client.submit("GET", "/ok");
  ASSERT_TRUE(client.wait_closed(ok));
  EXPECT_EQ(client.response(ok).status, 200);
}

TEST(ServerLimitsTest, Http2UnfinishedStreamsAndTheirBufferedBytesAreCapped) {
  ServerOptions o;
  o.http2_max_unfinished_streams = 2;
  o.http2_max_buffered_request_bytes = 1000;
  HttpServer server(o, [](std::shared_ptr<ServerStream> s) {
    s->send_simple(200, {}, std::to_string(s->request().body.size()));
  });
  ASSERT_TRUE(server.start().ok());
  testing::Http2TestClient client(server.port(), {});
  const int32_t a = client.submit_open("POST", "/a");
  const int32_t b = client.submit_open("POST", "/b");
  const int32_t c = client.submit_open("POST", "/c");
  ASSERT_TRUE(client.wait_closed(c));
  EXPECT_EQ(client.response(c).status, 503);
  EXPECT_NE(client.response(c).body.find("unfinished"), std::string::npos);
  // Together a and b may hold 1000 bytes: b's 700 after a's 600 is refused.
  client.send_more(a, std::string(600, 'a'));
  client.run_until([] { return false; }, 200);
  client.send_more(b, std::string(700, 'b'));
  ASSERT_TRUE(client.wait_closed(b));
  EXPECT_EQ(client.response(b).status, 503);
  client.send_more(a, "", /*end=*/true);
  ASSERT_TRUE(client.wait_closed(a));
  EXPECT_EQ(client.response(a).status, 200);
  EXPECT_EQ(client.response(a).body, "600");
}

TEST(ServerLimitsTest, Http2BodiesCountAgainstTheProcessMemoryBudget) {
  ServerOptions o;
  o.max_request_memory_bytes = 1000;
  HttpServer server(o, [](std::shared_ptr<ServerStream> s) { s->send_simple(200, {}, "ok"); });
  ASSERT_TRUE(server.start().ok());
  testing::Http2TestClient client(server.port(), {});
  const int32_t big = client.submit_open("POST", "/big", {{"Content-Length", "900"}});
  client.run_until([&] { return server.budget().request_bytes() == 900; }, 2000);
  const int32_t next = client.submit("POST", "/next", std::string(200, 'n'));
  ASSERT_TRUE(client.wait_closed(next));
  EXPECT_EQ(client.response(next).status, 503);
  client.send_more(big, std::string(900, 'b'), /*end=*/true);
  ASSERT_TRUE(client.wait_closed(big));
  EXPECT_EQ(client.response(big).status, 200);
}

}  // namespace
}  // namespace cutline::proto
