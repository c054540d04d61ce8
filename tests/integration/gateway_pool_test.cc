// An upstream pool in front of two fake upstreams: requests spread over both, one that goes
// away is ejected after a failure (the failed request ends labeled upstream_error, never hangs)
// and no request goes to it afterwards, and /v1/cutline/upstreams and /metrics show it.

#include <gtest/gtest.h>

#include <string>

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
  second.start({CUTLINE_FAKE_UPSTREAM_BIN, "--port", "0"}, dir + "/second.out",
               dir + "/second.err");
  ASSERT_TRUE(wait_for([&] { return read_file(dir + "/second.out").rfind("PORT ", 0) == 0; }));
  const auto second_port =
      static_cast<uint16_t>(std::atoi(read_file(dir + "/second.out").c_str() + 5));
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
  for (int i = 0; i < 6; ++i) {
    const std::string body = chat(env, &status);
    if (status != 200) {
      ++failed;
      EXPECT_NE(body.find("upstream"), std::string::npos) << body;
    }
  }
  EXPECT_LE(failed, 1);  // the one request that found it gone; then it is ejected
  EXPECT_EQ(requests_seen(env.fake_port), 3 + 6 - failed);

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

}  // namespace
}  // namespace cutline::test
