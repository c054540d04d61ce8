// The admin listener as an operator and an attacker meet it: GET/HEAD only (405 otherwise), an
// optional bearer token for every path but /healthz, /readyz answered from a cached probe, and
// the access log reopened on SIGUSR1 after logrotate renamed it.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

std::string admin_policy(uint16_t fake_port, const std::string& log, const std::string& admin) {
  return "listen:\n  - address: 127.0.0.1:0\nadmin:\n" + admin + "access_log: " + log +
         "\nupstreams:\n  - name: fake\n    url: http://127.0.0.1:" + std::to_string(fake_port) +
         "\n    models: [\"*\"]\npolicies:\n  - name: default\n" + "    match: {}\n";
}

int status_of(const std::string& url, std::string_view method, const proto::HttpHeaders& h = {}) {
  auto r = proto::http_fetch(url, method, h, "", 5000);
  return r.ok() ? r->status : -1;
}

// How many GET /v1/models the fake upstream has seen (the readiness probes).
int model_probes(const GatewayEnv& env) {
  auto r = proto::http_fetch(env.fake_url("/fake/requests"), "GET", {}, "", 5000);
  if (!r.ok()) return -1;
  int n = 0;
  for (size_t at = 0; (at = r->body.find("\"/v1/models\"", at)) != std::string::npos; ++at) ++n;
  return n;
}

TEST(GatewayAdmin, OnlyGetAndHeadAreAnswered) {
  GatewayEnv env;
  ASSERT_TRUE(env.start([](uint16_t port, const std::string& log) {
    return admin_policy(port, log, "  address: 127.0.0.1:0\n");
  })) << env.error;
  EXPECT_EQ(status_of(env.admin_url("/v1/cutline/policy"), "GET"), 200);
  EXPECT_EQ(status_of(env.admin_url("/v1/cutline/policy"), "HEAD"), 200);
  for (const char* method : {"DELETE", "POST", "PUT", "PATCH"}) {
    auto r = proto::http_fetch(env.admin_url("/v1/cutline/policy"), method, {}, "", 5000);
    ASSERT_TRUE(r.ok()) << method;
    EXPECT_EQ(r->status, 405) << method;
    EXPECT_EQ(r->headers.get("allow").value_or(""), "GET, HEAD") << method;
  }
  EXPECT_EQ(status_of(env.admin_url("/metrics"), "POST"), 405);
}

TEST(GatewayAdmin, TokenGuardsEverythingButHealthz) {
  ::setenv("CUTLINE_TEST_ADMIN_TOKEN", "s3cret-admin", 1);
  GatewayEnv env;
  ASSERT_TRUE(env.start([](uint16_t port, const std::string& log) {
    return admin_policy(port, log,
                        "  address: 127.0.0.1:0\n  token: env:CUTLINE_TEST_ADMIN_TOKEN\n");
  })) << env.error;
  const proto::HttpHeaders good{{"Authorization", "Bearer s3cret-admin"}};
  const proto::HttpHeaders bad{{"Authorization", "Bearer s3cret-admiN"}};
  EXPECT_EQ(status_of(env.admin_url("/healthz"), "GET"), 200);
  for (const char* path : {"/metrics", "/readyz", "/v1/cutline/policy", "/v1/cutline/streams"}) {
    auto r = proto::http_fetch(env.admin_url(path), "GET", {}, "", 5000);
    ASSERT_TRUE(r.ok()) << path;
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_EQ(r->headers.get("www-authenticate").value_or(""), "Bearer") << path;
    EXPECT_EQ(status_of(env.admin_url(path), "GET", bad), 401) << path;
  }
  EXPECT_EQ(status_of(env.admin_url("/metrics"), "GET", good), 200);
  EXPECT_EQ(status_of(env.admin_url("/v1/cutline/policy"), "GET", good), 200);
  // The method check comes first: no token is tried on a DELETE.
  EXPECT_EQ(status_of(env.admin_url("/v1/cutline/policy"), "DELETE", good), 405);
}

TEST(GatewayAdmin, ReadyzProbesUpstreamsOncePerSecondAtMost) {
  GatewayEnv env;
  ASSERT_TRUE(env.start([](uint16_t port, const std::string& log) {
    return admin_policy(port, log, "  address: 127.0.0.1:0\n");
  })) << env.error;
  ASSERT_TRUE(proto::http_fetch(env.fake_url("/fake/reset"), "POST", {}, "", 5000).ok());
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(status_of(env.admin_url("/readyz"), "GET"), 200) << i;
  }
  const int probes = model_probes(env);
  EXPECT_GE(probes, 1);
  EXPECT_LE(probes, 2) << "20 /readyz in well under 2 s should probe the upstream once (twice "
                          "if a second boundary passed)";
}

TEST(GatewayAdmin, AnAddressWithoutHostBindsLoopbackAndStartUpSaysWhatIsUp) {
  // ":0" is loopback; the start-up lines name it, the client listener and the upstream.
  GatewayEnv env;
  ASSERT_TRUE(env.start([](uint16_t port, const std::string& log) {
    return admin_policy(port, log, "  address: \":0\"\n");
  })) << env.error;
  EXPECT_EQ(status_of(env.admin_url("/healthz"), "GET"), 200);
  const std::string err = read_file(env.dir + "/gateway.err");
  EXPECT_NE(err.find("up: admin 127.0.0.1:" + std::to_string(env.admin_port) + "\n"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("up: listener 127.0.0.1:" + std::to_string(env.port)), std::string::npos)
      << err;
  EXPECT_NE(err.find("up: upstream fake http://127.0.0.1:" + std::to_string(env.fake_port)),
            std::string::npos)
      << err;
}

TEST(GatewayAccessLog, Sigusr1ReopensTheFileAfterARename) {
  GatewayEnv env;
  ASSERT_TRUE(env.start([](uint16_t port, const std::string& log) {
    return admin_policy(port, log, "  address: 127.0.0.1:0\n");
  })) << env.error;
  const std::string body =
      R"({"model":"fake-tokens=2","messages":[{"role":"user","content":"hi"}],"max_tokens":4})";
  const proto::HttpHeaders json{{"Content-Type", "application/json"}};
  auto post = [&] {
    auto r = proto::http_fetch(env.url("/v1/chat/completions"), "POST", json, body, 5000);
    return r.ok() ? r->status : -1;
  };
  ASSERT_EQ(post(), 200);
  ASSERT_TRUE(wait_for([&] { return !read_file(env.log_path).empty(); }));
  const std::string rotated = env.log_path + ".1";
  ASSERT_EQ(std::rename(env.log_path.c_str(), rotated.c_str()), 0);
  ASSERT_EQ(post(), 200);  // still written to the renamed file: nothing reopened it yet
  ASSERT_TRUE(wait_for([&] {
    const std::string old = read_file(rotated);
    return std::count(old.begin(), old.end(), '\n') == 2;
  }));
  env.gateway.signal(SIGUSR1);
  ASSERT_TRUE(wait_for(
      [&] { return read_file(env.dir + "/gateway.err").find("reopened") != std::string::npos; }));
  ASSERT_EQ(post(), 200);
  ASSERT_TRUE(wait_for([&] { return !read_file(env.log_path).empty(); }));
  const std::string fresh = read_file(env.log_path);
  EXPECT_EQ(std::count(fresh.begin(), fresh.end(), '\n'), 1) << fresh;
  EXPECT_NE(fresh.find("\"cause\""), std::string::npos);
  const std::string old = read_file(rotated);
  EXPECT_EQ(std::count(old.begin(), old.end(), '\n'), 2) << "no line after SIGUSR1 in the old file";
  EXPECT_TRUE(env.gateway.running());
}

// /v1/cutline/policy: which load is in force and what waits for a restart, then the policy as
// `cutline policy check --format json` renders it.
TEST(GatewayAdmin, ThePolicyEndpointShowsTheLoadAndThePolicyInForce) {
  GatewayEnv env;
  ASSERT_TRUE(env.start([](uint16_t port, const std::string& log) {
    return admin_policy(port, log, "  address: 127.0.0.1:0\n");
  })) << env.error;
  auto r = proto::http_fetch(env.admin_url("/v1/cutline/policy"), "GET", {}, "", 5000);
  ASSERT_TRUE(r.ok());
  const std::string& body = r->body;
  EXPECT_EQ(body.find(R"({"generation":1,"loaded_at_unix_s":)"), 0u) << body;
  EXPECT_NE(body.find(R"("restart_required":[],"policy":{"source_file":")" + env.config_path),
            std::string::npos)
      << body;
  EXPECT_NE(body.find(R"("upstreams":[{"name":"fake")"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("policies":[{"name":"default")"), std::string::npos) << body;
}

}  // namespace
}  // namespace cutline::test
