// Passthrough routes and GET /v1/models go through the upstream's endpoint pool as the OpenAI
// routes do: with one endpoint of two down, both succeed through the healthy one (the request
// that found the dead one first is retried there: attempts 2), the dead one is ejected and shows
// so in /v1/cutline/upstreams and /metrics, and nothing is sent to it afterwards; with two
// healthy endpoints the requests spread over both; an upstream whose endpoints are all ejected
// is left out of the merged model list at once, counted as an upstream error.

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

std::string label(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// A loopback port nothing listens on (not `skip`) whose "host:port" sorts before `other`'s: the
// pool orders its endpoints by label, so round robin tries this one first.
uint16_t dead_port_before(uint16_t other, uint16_t skip = 0) {
  for (uint16_t p = 10000; p < 10500; ++p) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(p);
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (free && p != skip && label(p) < label(other)) return p;
  }
  return 0;
}

// Requests the fake upstream on `port` received for `path`.
int seen(uint16_t port, const std::string& path) {
  auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(port) + "/fake/requests", "GET",
                             {}, "", 5000);
  if (!r.ok()) return -1;
  int n = 0;
  const std::string key = "\"path\":\"" + path + "\"";
  for (size_t at = r->body.find(key); at != std::string::npos; at = r->body.find(key, at + 1)) ++n;
  return n;
}

// The access-log line of the request with `path` that ends the log once `count` such lines are
// there ("" when they never are).
std::string nth_log_line(const GatewayEnv& env, const std::string& path, int count) {
  std::string found;
  wait_for([&] {
    std::istringstream log(read_file(env.log_path));
    int n = 0;
    for (std::string line; std::getline(log, line);) {
      if (line.find("\"path\":\"" + path + "\"") == std::string::npos) continue;
      if (++n == count) found = line;
    }
    return n >= count;
  });
  return found;
}

// The /v1/cutline/upstreams entry of `address`.
std::string endpoint_entry(const GatewayEnv& env, const std::string& address) {
  auto r = proto::http_fetch(env.admin_url("/v1/cutline/upstreams"), "GET", {}, "", 5000);
  if (!r.ok()) return "";
  const size_t at = r->body.find("\"address\":\"" + address + "\"");
  if (at == std::string::npos) return "";
  const size_t end = r->body.find("\"address\"", at + 1);
  return r->body.substr(at, end == std::string::npos ? end : end - at);
}

std::string metrics(const GatewayEnv& env) {
  auto r = proto::http_fetch(env.admin_url("/metrics"), "GET", {}, "", 5000);
  return r.ok() ? r->body : "";
}

// One upstream "pool" over `first` and `second`, round robin, no active health checks (a dead
// endpoint is found by the requests themselves), ejected after one failure for a minute — both
// of them if both fail (max_ejection_percent: 100), so that the pool can run out.
std::string pool_policy(const std::string& log, uint16_t first, uint16_t second) {
  return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
         "access_log: " +
         log + "\npassthrough: allow\nupstreams:\n  - name: pool\n    endpoints: [\"http://" +
         label(first) + "\", \"http://" + label(second) +
         "\"]\n    balance: round_robin\n    health: off\n"
         "    outlier: {consecutive_failures: 1, base_ejection: 1m, max_ejection_percent: 100}\n"
         "policies:\n  - name: default\n    match: {models: [\"fake*\"]}\n";
}

class GatewayPoolRoutes : public ::testing::Test {
 protected:
  // A gateway whose pool is the fake upstream and a dead port tried first.
  void start_with_dead_endpoint() {
    env_.gateway_args = {"--upstream-error-detail"};  // answers name the endpoints tried
    ASSERT_TRUE(env_.start([&](uint16_t port, const std::string& log) {
      dead_ = dead_port_before(port);
      return pool_policy(log, dead_, port);
    })) << env_.error;
    ASSERT_NE(dead_, 0);
  }
  void expect_dead_ejected() {
    const std::string entry = endpoint_entry(env_, label(dead_));
    EXPECT_NE(entry.find("\"ejected\":true"), std::string::npos) << entry;
    EXPECT_NE(metrics(env_).find("cutline_upstream_endpoint_ejections_total{upstream=\"pool\","
                                 "endpoint=\"" +
                                 label(dead_) + "\"} 1"),
              std::string::npos);
  }
  void TearDown() override { env_.stop(); }

  GatewayEnv env_;
  uint16_t dead_ = 0;
};

TEST_F(GatewayPoolRoutes, PassthroughGoesToTheHealthyEndpointAndEjectsTheDeadOne) {
  start_with_dead_endpoint();
  const std::string alive = label(env_.fake_port);
  for (int i = 1; i <= 4; ++i) {
    // A POST too: a connection refused means the upstream never saw it, so it is retried.
    auto r = proto::http_fetch(env_.url("/v1/some/other"), i == 1 ? "POST" : "GET",
                               {{"Content-Type", "application/json"}}, "{}", 10000);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->headers.get("X-Fake-Echo").value_or(""), "1");
    const std::string line = nth_log_line(env_, "/v1/some/other", i);
    if (i == 1) {
      EXPECT_NE(line.find("\"attempts\":2"), std::string::npos) << line;
      EXPECT_NE(line.find("\"endpoints\":[\"" + label(dead_) + "\",\"" + alive + "\"]"),
                std::string::npos)
          << line;
    } else {
      EXPECT_NE(line.find("\"attempts\":1,\"endpoints\":[\"" + alive + "\"]"), std::string::npos)
          << line;
    }
    EXPECT_NE(line.find("\"cause\":\"eos\""), std::string::npos) << line;
  }
  EXPECT_EQ(seen(env_.fake_port, "/v1/some/other"), 4);
  expect_dead_ejected();
  EXPECT_NE(metrics(env_).find("cutline_upstream_endpoint_requests_total{upstream=\"pool\","
                               "endpoint=\"" +
                               alive + "\"} 4"),
            std::string::npos);
  // The last endpoint goes too: the request that finds it gone gets the gateway's 502; then the
  // pool has none left and the answer says so at once (503), both labeled upstream_error.
  env_.fake.stop();
  for (int status : {502, 503}) {
    auto r = proto::http_fetch(env_.url("/v1/some/other"), "GET", {}, "", 10000);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_NE(r->headers.get("Cutline-Stop").value_or("").find("cause=upstream_error"),
              std::string::npos);
  }
}

TEST_F(GatewayPoolRoutes, ModelsAskTheHealthyEndpointAndEjectTheDeadOne) {
  start_with_dead_endpoint();
  const std::string alive = label(env_.fake_port);
  auto r = proto::http_fetch(env_.url("/v1/models"), "GET", {}, "", 10000);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("\"id\":\"fake\""), std::string::npos) << r->body;
  EXPECT_NE(r->headers.get("Cutline-Stop").value_or("").find("cause=eos"), std::string::npos);
  const std::string line = nth_log_line(env_, "/v1/models", 1);
  EXPECT_NE(line.find("\"attempts\":2,\"endpoints\":[\"" + label(dead_) + "\",\"" + alive + "\"]"),
            std::string::npos)
      << line;
  EXPECT_EQ(seen(env_.fake_port, "/v1/models"), 1);
  expect_dead_ejected();
}

TEST(GatewayPoolRoutesSpread, PassthroughSpreadsOverTwoHealthyEndpoints) {
  const std::string dir = make_temp_dir();
  Process second;
  const uint16_t second_port = start_fake_upstream(second, dir, "second");
  ASSERT_NE(second_port, 0) << read_file(dir + "/second.err");
  GatewayEnv env;
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& log) {
    return pool_policy(log, port, second_port);
  })) << env.error;
  for (int i = 0; i < 6; ++i) {
    auto r = proto::http_fetch(env.url("/v1/files?n=" + std::to_string(i)), "GET", {}, "", 10000);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status, 200) << r->body;
  }
  EXPECT_EQ(seen(env.fake_port, "/v1/files"), 3);
  EXPECT_EQ(seen(second_port, "/v1/files"), 3);
  const std::string m = metrics(env);
  for (uint16_t p : {env.fake_port, second_port}) {
    EXPECT_NE(m.find("cutline_upstream_endpoint_requests_total{upstream=\"pool\",endpoint=\"" +
                     label(p) + "\"} 3"),
              std::string::npos)
        << label(p);
  }
  env.stop();
  second.stop();
}

// Two upstreams: "live" (the fake) and "gone" (two dead ports). The first list asks both dead
// ports (each ejected in turn) and answers with live's models; the next finds gone with no
// endpoint, leaves it out at once and counts it as an upstream error.
TEST(GatewayPoolRoutesSpread, ModelsLeaveOutAnUpstreamWithEveryEndpointEjected) {
  GatewayEnv env;
  uint16_t dead[2] = {0, 0};
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& log) {
    dead[0] = dead_port_before(port);
    dead[1] = dead_port_before(port, dead[0]);
    return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
           "access_log: " +
           log + "\nupstreams:\n  - name: live\n    url: http://" + label(port) +
           "\n    models: [\"fake*\"]\n  - name: gone\n    models: [\"other*\"]\n"
           "    endpoints: [\"http://" +
           label(dead[0]) + "\", \"http://" + label(dead[1]) +
           "\"]\n    health: off\n"
           "    outlier: {consecutive_failures: 1, base_ejection: 1m, max_ejection_percent: 100}\n"
           "policies:\n  - name: default\n";
  })) << env.error;
  ASSERT_NE(dead[1], 0);
  for (int i = 0; i < 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = proto::http_fetch(env.url("/v1/models"), "GET", {}, "", 10000);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->body.find("\"id\":\"fake\""), std::string::npos) << r->body;
    EXPECT_LT(s, 2.0);
  }
  for (uint16_t p : dead) {
    EXPECT_NE(endpoint_entry(env, label(p)).find("\"ejected\":true"), std::string::npos);
  }
  const std::string m = metrics(env);
  EXPECT_NE(m.find("cutline_upstream_errors_total{kind=\"connect_refused\",upstream=\"gone\"} 2"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("cutline_upstream_errors_total{kind=\"no_endpoint\",upstream=\"gone\"} 1"),
            std::string::npos)
      << m;
  EXPECT_EQ(seen(env.fake_port, "/v1/models"), 2);  // an incomplete list is not cached
  env.stop();
}

}  // namespace
}  // namespace cutline::test
