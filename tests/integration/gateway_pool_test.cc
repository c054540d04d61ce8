// An upstream pool in front of two fake upstreams: requests spread over both, one that goes
// away is ejected after a failure (the request that found it gone is retried on the other
// endpoint: its record says attempts 2) and no request goes to it afterwards, and
// /v1/cutline/upstreams and /metrics show it. A retry happens only before the first byte went to
// the client (connect refused, reset before the head, a 5xx), never once tokens went out.

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <string>
#include <thread>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

std::string chat(const GatewayEnv& env, int* status) {
  auto r = proto::http_fetch(
      env.url("/v1/chat/completions"), "POST", {{"Content-Type", "application/json"}},
      R"({"model":"fake-tokens=3","messages":[{"role":"user","content":"hi"}]})", 10000);
  *status = r.ok() ? r->status : -1;
  return r.ok() ? r->body : r.error().message;
}

int requests_seen(uint16_t port) {
  auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(port) + "/fake/requests", "GET",
                             {}, "", 5000);
  if (!r.ok()) return -1;
  int n = 0;
  for (size_t at = r->body.find("\"path\""); at != std::string::npos;
       at = r->body.find("\"path\"", at + 1)) {
    ++n;
  }
  return n;
}

TEST(GatewayPool, SpreadsOverEndpointsAndEjectsOneThatGoesAway) {
  const std::string dir = make_temp_dir();
  Process second;
  const uint16_t second_port = start_fake_upstream(second, dir, "second");
  ASSERT_NE(second_port, 0) << read_file(dir + "/second.err");
  GatewayEnv env;
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& log) {
    return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
           "access_log: " +
           log + "\nupstreams:\n  - name: pool\n    endpoints: [\"http://127.0.0.1:" +
           std::to_string(port) + "\", \"http://127.0.0.1:" + std::to_string(second_port) +
           "\"]\n    balance: round_robin\n    health: off\n"
           "    outlier: {consecutive_failures: 1, base_ejection: 1m}\n"
           "policies:\n  - name: default\n";
  })) << env.error;

  int status = 0;
  for (int i = 0; i < 6; ++i) {
    chat(env, &status);
    EXPECT_EQ(status, 200);
  }
  EXPECT_EQ(requests_seen(env.fake_port), 3);
  EXPECT_EQ(requests_seen(second_port), 3);

  second.stop();
  int failed = 0;
  int retried = 0;
  for (int i = 0; i < 6; ++i) {
    const std::string body = chat(env, &status);
    if (status != 200) {
      ++failed;
      EXPECT_NE(body.find("upstream"), std::string::npos) << body;
    }
    if (body.find("\"attempts\":2") != std::string::npos) ++retried;
  }
  EXPECT_EQ(retried, 1);
  // The one request that found it gone was retried on the first endpoint; then it is ejected.
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(requests_seen(env.fake_port), 3 + 6);

  auto live = proto::http_fetch(env.admin_url("/v1/cutline/upstreams"), "GET", {}, "", 5000);
  ASSERT_TRUE(live.ok());
  const std::string gone = "\"address\":\"127.0.0.1:" + std::to_string(second_port) + "\"";
  const size_t at = live->body.find(gone);
  ASSERT_NE(at, std::string::npos) << live->body;
  EXPECT_NE(live->body.find("\"ejected\":true", at), std::string::npos) << live->body;
  auto metrics = proto::http_fetch(env.admin_url("/metrics"), "GET", {}, "", 5000);
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("cutline_upstream_endpoint_ejections_total{upstream=\"pool\","
                               "endpoint=\"127.0.0.1:" +
                               std::to_string(second_port) + "\"} 1"),
            std::string::npos);
  env.stop();
}

// A loopback listener that fails every request the way a broken endpoint does: answers 503 to
// whatever arrives, or closes the connection before any response head.
class BrokenEndpoint {
 public:
  enum class Mode { kAnswer503, kResetBeforeHead };
  explicit BrokenEndpoint(Mode mode) : mode_(mode) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen(fd_, 16);
    thread_ = std::thread([this] { serve(); });
  }
  ~BrokenEndpoint() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void serve() {
    while (!stop_) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++accepted_;
      if (mode_ == Mode::kAnswer503) {
        char buf[8192];
        std::string got;
        while (got.find("\r\n\r\n") == std::string::npos) {  // the head; the body is ignored
          const ssize_t n = recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          got.append(buf, static_cast<size_t>(n));
        }
        const std::string body = R"({"error":{"message":"overloaded","type":"server_error"}})";
        const std::string answer =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            "Connection: close\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body;
        send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      } else {
        char buf[8192];
        recv(c, buf, sizeof buf, 0);  // the request arrived: close with nothing said
        linger l{1, 0};
        setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof l);  // RST
      }
      close(c);
    }
  }
  Mode mode_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

std::string pool_yaml(const std::string& log, uint16_t first, uint16_t second) {
  return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
         "access_log: " +
         log + "\nupstreams:\n  - name: pool\n    endpoints: [\"http://127.0.0.1:" +
         std::to_string(first) + "\", \"http://127.0.0.1:" + std::to_string(second) +
         "\"]\n    balance: round_robin\n    health: off\npolicies:\n  - name: default\n";
}

// A 503 answer or a reset before the head, before anything went to the client: the request is
// sent to the other endpoint and the client gets the answer; the record names both endpoints,
// and the broken endpoint's retries counter shows it.
TEST(GatewayPool, RetriesOnAnotherEndpointWhenOneFailsBeforeTheAnswerBegins) {
  for (auto mode : {BrokenEndpoint::Mode::kAnswer503, BrokenEndpoint::Mode::kResetBeforeHead}) {
    BrokenEndpoint broken(mode);
    GatewayEnv env;
    env.gateway_args = {"--upstream-error-detail"};  // the answer names the endpoints tried
    ASSERT_TRUE(env.start([&](uint16_t port, const std::string& log) {
      return pool_yaml(log, broken.port(), port);
    })) << env.error;
    const std::string broken_label = "127.0.0.1:" + std::to_string(broken.port());
    const std::string good_label = "127.0.0.1:" + std::to_string(env.fake_port);
    int retried = 0;
    for (int i = 0; i < 4; ++i) {
      // Streaming: the client head would go out with the first 200 byte, not before.
      auto r = proto::http_fetch(
          env.url("/v1/chat/completions"), "POST", {{"Content-Type", "application/json"}},
          R"({"model":"fake-tokens=3","stream":true,"messages":[{"role":"user","content":"hi"}]})",
          10000);
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(r->status, 200) << r->body;
      const std::string last = last_chunk(r->body);
      EXPECT_NE(last.find("\"cause\":\"eos\""), std::string::npos) << last;
      if (last.find("\"attempts\":2") != std::string::npos) {
        ++retried;
        EXPECT_NE(last.find("\"endpoints\":[\"" + broken_label + "\",\"" + good_label + "\"]"),
                  std::string::npos)
            << last;
      } else {
        EXPECT_NE(last.find("\"attempts\":1"), std::string::npos) << last;
      }
    }
    EXPECT_EQ(retried, 2);  // round robin sent every other request to the broken one first
    EXPECT_EQ(broken.accepted(), 2);
    EXPECT_EQ(requests_seen(env.fake_port), 4);
    auto metrics = proto::http_fetch(env.admin_url("/metrics"), "GET", {}, "", 5000);
    ASSERT_TRUE(metrics.ok());
    EXPECT_NE(metrics->body.find("cutline_upstream_endpoint_retries_total{upstream=\"pool\","
                                 "endpoint=\"" +
                                 broken_label + "\"} 2"),
              std::string::npos)
        << metrics->body;
    env.stop();
  }
}

// Once tokens went out, an upstream that drops the stream ends it upstream_disconnect: no retry
// (the client has the beginning of one answer), one attempt, one request upstream.
TEST(GatewayPool, NeverRetriesAfterTokensWentOut) {
  const std::string dir = make_temp_dir();
  Process second;
  const uint16_t second_port = start_fake_upstream(second, dir, "second");
  ASSERT_NE(second_port, 0) << read_file(dir + "/second.err");
  GatewayEnv env;
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& log) {
    return pool_yaml(log, port, second_port);
  })) << env.error;
  for (int i = 0; i < 2; ++i) {
    auto r = proto::http_fetch(
        env.url("/v1/chat/completions"), "POST", {{"Content-Type", "application/json"}},
        R"({"model":"fake-tokens=5,drop_at=2","stream":true,"messages":[{"role":"user","content":"hi"}]})",
        10000);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const std::string last = last_chunk(r->body);
    EXPECT_NE(last.find("\"cause\":\"upstream_disconnect\""), std::string::npos) << r->body;
    EXPECT_NE(last.find("\"attempts\":1"), std::string::npos) << last;
  }
  EXPECT_EQ(requests_seen(env.fake_port) + requests_seen(second_port), 2);
  env.stop();
  second.stop();
}

// A request whose own content makes the upstream answer 500 is answered 500 by every endpoint it
// is retried on. Three of them, with consecutive_failures: 3, used to eject both endpoints of a
// pool of two (each request counted on both), and every client got 503 for the ejection time.
// Now a request counts one such failure, and max_ejection_percent (50 by default) keeps one
// endpoint of the two in service: the next good request is served.
TEST(GatewayPool, ClientProvokedServerErrorsLeaveAnEndpointInService) {
  const std::string dir = make_temp_dir();
  Process second;
  const uint16_t second_port = start_fake_upstream(second, dir, "second");
  ASSERT_NE(second_port, 0) << read_file(dir + "/second.err");
  GatewayEnv env;
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& log) {
    return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
           "access_log: " +
           log + "\nupstreams:\n  - name: pool\n    endpoints: [\"http://127.0.0.1:" +
           std::to_string(port) + "\", \"http://127.0.0.1:" + std::to_string(second_port) +
           "\"]\n    health: off\n"
           "    outlier: {consecutive_failures: 3, base_ejection: 1m}\n"
           "policies:\n  - name: default\n";
  })) << env.error;
  for (int i = 0; i < 3; ++i) {
    auto r = proto::http_fetch(
        env.url("/v1/chat/completions"), "POST", {{"Content-Type", "application/json"}},
        R"({"model":"fake-status=500","messages":[{"role":"user","content":"hi"}]})", 10000);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status, 500) << r->body;
  }
  int status = 0;
  const std::string body = chat(env, &status);
  EXPECT_EQ(status, 200) << body;
  auto live = proto::http_fetch(env.admin_url("/v1/cutline/upstreams"), "GET", {}, "", 5000);
  ASSERT_TRUE(live.ok());
  size_t ejected = 0;
  for (size_t at = live->body.find("\"ejected\":true"); at != std::string::npos;
       at = live->body.find("\"ejected\":true", at + 1)) {
    ++ejected;
  }
  EXPECT_LE(ejected, 1u) << live->body;
  env.stop();
  second.stop();
}

// An endpoint that takes the request and never answers (a stopped process) is given up after the
// upstream's response_head_timeout: 504 with the record (upstream_error, rule
// upstreams.<name>.response_head_timeout), streamed or not, and on a passed-through route.
TEST(GatewayPool, AnUpstreamThatNeverAnswersIsCutAfterTheResponseHeadTimeout) {
  GatewayEnv env;
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& log) {
    return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
           "access_log: " +
           log + "\nupstreams:\n  - name: fake\n    url: http://127.0.0.1:" + std::to_string(port) +
           "\n    response_head_timeout: 300ms\npolicies:\n  - name: default\n";
  })) << env.error;
  const proto::HttpHeaders hang{{"Content-Type", "application/json"}, {"X-Fake-Script", "hang=1"}};
  for (const char* stream : {"false", "true"}) {
    auto r = proto::http_fetch(env.url("/v1/chat/completions"), "POST", hang,
                               std::string(R"({"model":"fake","stream":)") + stream +
                                   R"(,"messages":[{"role":"user","content":"hi"}]})",
                               20000);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status, 504) << r->body;
    EXPECT_NE(r->body.find("\"cause\":\"upstream_error\""), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("\"rule\":\"upstreams.fake.response_head_timeout\""), std::string::npos)
        << r->body;
    EXPECT_NE(r->headers.get("Cutline-Stop").value_or("").find("cause=upstream_error"),
              std::string::npos);
  }
  auto r = proto::http_fetch(env.url("/v1/files"), "GET", hang, "", 20000);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 504) << r->body;
  EXPECT_NE(r->body.find("\"rule\":\"upstreams.fake.response_head_timeout\""), std::string::npos)
      << r->body;
  // The upstream did get each request: they were sent, then waited for.
  EXPECT_EQ(requests_seen(env.fake_port), 3);
  env.stop();
}

}  // namespace
}  // namespace cutline::test
