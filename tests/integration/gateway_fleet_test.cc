// A pool of inference servers that answer /health only (as vLLM, SGLang, TGI and llama.cpp's
// server do; /healthz is 404 there) behind the default health settings: the gateway serves the
// first request sent once /readyz says ready (each endpoint is checked at once, on the default
// path /health); with two of three endpoints gone the pool routes in panic (health ignored, the
// live endpoint still answers, never "no endpoint available") and says so in /metrics and
// /v1/cutline/upstreams; an endpoint a reload adds serves at once, before its first check.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

std::string chat(const GatewayEnv& env, int* status) {
  auto r = proto::http_fetch(
      env.url("/v1/chat/completions"), "POST", {{"Content-Type", "application/json"}},
      R"({"model":"fake-tokens=3","messages":[{"role":"user","content":"hi"}]})", 20000);
  *status = r.ok() ? r->status : -1;
  return r.ok() ? r->body : r.error().message;
}

// Chat requests the fake upstream on `port` received (not /readyz's GET /v1/models).
int requests_seen(uint16_t port) {
  auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(port) + "/fake/requests", "GET",
                             {}, "", 5000);
  if (!r.ok()) return -1;
  const std::string key = "\"path\":\"/v1/chat/completions\"";
  int n = 0;
  for (size_t at = r->body.find(key); at != std::string::npos; at = r->body.find(key, at + 1)) {
    ++n;
  }
  return n;
}

std::string admin_get(const GatewayEnv& env, const std::string& path) {
  auto r = proto::http_fetch(env.admin_url(path), "GET", {}, "", 5000);
  return r.ok() ? r->body : "";
}

int readyz_status(const GatewayEnv& env) {
  auto r = proto::http_fetch(env.admin_url("/readyz"), "GET", {}, "", 5000);
  return r.ok() ? r->status : -1;
}

std::string url_of(uint16_t port) { return "\"http://127.0.0.1:" + std::to_string(port) + "\""; }

std::string fleet_yaml(const std::string& log, const std::string& endpoints,
                       const std::string& keys) {
  return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
         "access_log: " +
         log + "\nupstreams:\n  - name: pool\n    endpoints: [" + endpoints + "]\n" + keys +
         "policies:\n  - name: default\n";
}

// Three vLLM-like endpoints, default health settings (path /health, interval 5s): the first
// request after /readyz turns 200 is answered 200. (With /healthz as the default path every
// endpoint failed its checks and every request was answered 503.)
TEST(GatewayFleet, ServesTheFirstRequestOnceReady) {
  const std::string dir = make_temp_dir();
  Process second, third;
  const uint16_t second_port = start_fake_upstream(second, dir, "second", {"--health-only"});
  const uint16_t third_port = start_fake_upstream(third, dir, "third", {"--health-only"});
  ASSERT_NE(second_port, 0) << read_file(dir + "/second.err");
  ASSERT_NE(third_port, 0) << read_file(dir + "/third.err");
  GatewayEnv env;
  env.fake_args = {"--health-only"};
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& log) {
    return fleet_yaml(log, url_of(port) + ", " + url_of(second_port) + ", " + url_of(third_port),
                      "");
  })) << env.error;
  ASSERT_TRUE(wait_for([&] { return readyz_status(env) == 200; }, 30000))
      << admin_get(env, "/readyz");
  int status = 0;
  const std::string body = chat(env, &status);
  EXPECT_EQ(status, 200) << body;
  // Every endpoint was checked at once, not an interval (5 s) later, and passed on /health.
  // Readiness needs only one of them to have passed, so the others' first answers may still be
  // on their way when the first request goes out.
  std::string live;
  EXPECT_TRUE(wait_for(
      [&] {
        live = admin_get(env, "/v1/cutline/upstreams");
        return live.find("\"checked\":false") == std::string::npos;
      },
      4000))
      << live;
  EXPECT_NE(live.find("\"health_path\":\"/health\""), std::string::npos) << live;
  EXPECT_EQ(live.find("\"healthy\":false"), std::string::npos) << live;
  EXPECT_NE(live.find("\"panic\":false"), std::string::npos) << live;
  for (int i = 0; i < 5; ++i) {
    chat(env, &status);
    EXPECT_EQ(status, 200);
  }
  EXPECT_EQ(requests_seen(env.fake_port) + requests_seen(second_port) + requests_seen(third_port),
            6);
  env.stop();
  second.stop();
  third.stop();
}

// Two of three endpoints gone: fewer than half healthy, so the pool routes in panic. Requests
// still get answers (from the live endpoint, or a labeled connect error), never 503 "no endpoint
// available"; the panic shows in /metrics and /v1/cutline/upstreams.
TEST(GatewayFleet, LosingMostOfThePoolRoutesInPanic) {
  const std::string dir = make_temp_dir();
  Process second, third;
  const uint16_t second_port = start_fake_upstream(second, dir, "second", {"--health-only"});
  const uint16_t third_port = start_fake_upstream(third, dir, "third", {"--health-only"});
  ASSERT_NE(second_port, 0) << read_file(dir + "/second.err");
  ASSERT_NE(third_port, 0) << read_file(dir + "/third.err");
  GatewayEnv env;
  env.fake_args = {"--health-only"};
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& log) {
    return fleet_yaml(log, url_of(port) + ", " + url_of(second_port) + ", " + url_of(third_port),
                      "    health: {interval: 200ms, timeout: 150ms}\n");
  })) << env.error;
  ASSERT_TRUE(wait_for([&] { return readyz_status(env) == 200; }, 30000))
      << admin_get(env, "/readyz");
  second.stop();
  third.stop();
  ASSERT_TRUE(wait_for(
      [&] {
        return admin_get(env, "/metrics").find("cutline_upstream_panic{upstream=\"pool\"} 1") !=
               std::string::npos;
      },
      30000))
      << admin_get(env, "/v1/cutline/upstreams");
  EXPECT_NE(admin_get(env, "/v1/cutline/upstreams").find("\"panic\":true"), std::string::npos);
  int answered = 0;
  for (int i = 0; i < 6; ++i) {
    int status = 0;
    const std::string body = chat(env, &status);
    if (status == 200) {
      ++answered;
    } else {
      EXPECT_NE(body.find("\"cause\":\"upstream_error\""), std::string::npos) << body;
    }
    EXPECT_EQ(body.find("no endpoint available"), std::string::npos) << body;
  }
  EXPECT_GT(answered, 0);
  EXPECT_GT(requests_seen(env.fake_port), 0);
  const std::string metrics = admin_get(env, "/metrics");
  const std::string key = "cutline_upstream_panic_total{upstream=\"pool\"} ";
  const size_t at = metrics.find(key);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GE(std::atol(metrics.c_str() + at + key.size()), 6) << metrics;
  env.stop();
}

// A reload adds an endpoint to the pool: it takes its share of requests at once (it is
// routable before its first check), and its first check runs at once, not an interval later.
TEST(GatewayFleet, AnEndpointAReloadAddsServesAtOnce) {
  const std::string dir = make_temp_dir();
  Process second;
  const uint16_t second_port = start_fake_upstream(second, dir, "second", {"--health-only"});
  ASSERT_NE(second_port, 0) << read_file(dir + "/second.err");
  GatewayEnv env;
  env.fake_args = {"--health-only"};
  std::string log;
  const std::string keys = "    balance: round_robin\n    health: {interval: 600s, timeout: 10s}\n";
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& l) {
    log = l;
    return fleet_yaml(l, url_of(port), keys);
  })) << env.error;
  ASSERT_TRUE(wait_for([&] { return readyz_status(env) == 200; }, 30000))
      << admin_get(env, "/readyz");

  const std::string second_label = "\"address\":\"127.0.0.1:" + std::to_string(second_port) + "\"";
  {
    const std::string next = env.config_path + ".next";
    std::ofstream(next) << fleet_yaml(log, url_of(env.fake_port) + ", " + url_of(second_port),
                                      keys);
    ASSERT_EQ(std::rename(next.c_str(), env.config_path.c_str()), 0);
  }
  ASSERT_TRUE(wait_for(
      [&] {
        return admin_get(env, "/v1/cutline/upstreams").find(second_label) != std::string::npos;
      },
      20000))
      << "not reloaded: " << read_file(env.dir + "/gateway.err");
  for (int i = 0; i < 4; ++i) {
    int status = 0;
    const std::string body = chat(env, &status);
    EXPECT_EQ(status, 200) << body;
  }
  EXPECT_EQ(requests_seen(second_port), 2);
  // Checked long before the 600 s interval.
  EXPECT_TRUE(wait_for(
      [&] {
        const std::string live = admin_get(env, "/v1/cutline/upstreams");
        const size_t at = live.find(second_label);
        return at != std::string::npos && live.find("\"checked\":true", at) < live.find('}', at);
      },
      20000))
      << admin_get(env, "/v1/cutline/upstreams");
  env.stop();
  second.stop();
}

}  // namespace
}  // namespace cutline::test
