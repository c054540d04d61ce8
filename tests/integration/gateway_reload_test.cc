// Policy reload from the file watch: an edit in place and a Kubernetes-style ConfigMap update
// (the policy file is a link through "..data", and the kubelet renames a new "..data" link over
// the old one, so no event names the policy file itself) both put the new policy in force.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

std::string policy_yaml(uint16_t fake_port, const std::string& log, const std::string& deadline) {
  return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
         "access_log: " +
         log +
         "\nupstreams:\n  - name: fake\n    url: http://127.0.0.1:" + std::to_string(fake_port) +
         "\n    models: [\"fake\"]\npolicies:\n  - name: default\n    match: {}\n    deadline: " +
         deadline + "\n";
}

// The value of cutline_policy_reload_total{result="ok"} (0 when absent).
long reloads_ok(const GatewayEnv& env) {
  auto r = proto::http_fetch(env.admin_url("/metrics"), "GET", {}, "", 5000);
  if (!r.ok()) return -1;
  const std::string key = "cutline_policy_reload_total{result=\"ok\"} ";
  const size_t at = r->body.find(key);
  return at == std::string::npos ? 0 : std::atol(r->body.c_str() + at + key.size());
}

// /v1/cutline/policy (the policy in force) mentions `text`.
bool policy_has(const GatewayEnv& env, const std::string& text) {
  auto r = proto::http_fetch(env.admin_url("/v1/cutline/policy"), "GET", {}, "", 5000);
  return r.ok() && r->body.find(text) != std::string::npos;
}

TEST(GatewayReload, AConfigMapStyleLinkSwapReloadsThePolicy) {
  GatewayEnv env;
  uint16_t fake_port = 0;
  std::string log;
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& l) {
    fake_port = port;
    log = l;
    return policy_yaml(port, l, "61s");
  })) << env.error;
  ASSERT_TRUE(wait_for([&] { return policy_has(env, "61000"); }));

  // Lay the directory out as the kubelet does: ..2026_1/cutline.yaml, ..data -> ..2026_1, and
  // cutline.yaml -> ..data/cutline.yaml (replacing the plain file is itself a change).
  const std::string d = env.dir;
  ASSERT_EQ(::mkdir((d + "/..2026_1").c_str(), 0755), 0);
  std::ofstream(d + "/..2026_1/cutline.yaml") << policy_yaml(fake_port, log, "62s");
  ASSERT_EQ(::symlink("..2026_1", (d + "/..data").c_str()), 0);
  ASSERT_EQ(::symlink("..data/cutline.yaml", (d + "/cutline.yaml.new").c_str()), 0);
  ASSERT_EQ(std::rename((d + "/cutline.yaml.new").c_str(), (d + "/cutline.yaml").c_str()), 0);
  ASSERT_TRUE(wait_for([&] { return policy_has(env, "62000"); })) << "the link to ..data";
  const long before = reloads_ok(env);

  // The ConfigMap update: a new timestamped directory and an atomic swap of "..data".
  ASSERT_EQ(::mkdir((d + "/..2026_2").c_str(), 0755), 0);
  std::ofstream(d + "/..2026_2/cutline.yaml") << policy_yaml(fake_port, log, "63s");
  ASSERT_EQ(::symlink("..2026_2", (d + "/..data_tmp").c_str()), 0);
  ASSERT_EQ(std::rename((d + "/..data_tmp").c_str(), (d + "/..data").c_str()), 0);
  EXPECT_TRUE(wait_for([&] { return policy_has(env, "63000"); }))
      << "the ConfigMap update was not seen";
  EXPECT_GT(reloads_ok(env), before);
  env.stop();
}

// A reload cannot move the admin listener, reopen the access log elsewhere, switch the token-pool
// store or change the process-wide limits: it says so in the log and in /v1/cutline/policy
// ("restart_required") instead of ignoring the edit, applies the rest (the deadline), and clears
// the list once the file matches the running gateway again.
TEST(GatewayReload, FieldsAReloadCannotApplyAreReportedNotIgnored) {
  GatewayEnv env;
  uint16_t fake_port = 0;
  std::string log;
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& l) {
    fake_port = port;
    log = l;
    return policy_yaml(port, l, "61s");
  })) << env.error;
  ASSERT_TRUE(wait_for([&] { return policy_has(env, "\"restart_required\":[]"); }));

  std::string edited = policy_yaml(fake_port, log + ".new", "62s");
  edited.replace(edited.find("127.0.0.1:0\naccess_log"), 11, "127.0.0.1:19");  // admin
  edited += "limits: {max_body_bytes: 4096}\nbudget_store: redis://127.0.0.1:1/0\n";
  std::ofstream(env.config_path) << edited;
  EXPECT_TRUE(wait_for([&] { return policy_has(env, "62000"); }, 10000)) << "not reloaded";
  EXPECT_TRUE(policy_has(
      env, "\"restart_required\":[\"admin\",\"access_log\",\"budget_store\",\"limits\"]"));
  const std::string err = read_file(env.dir + "/gateway.err");
  EXPECT_NE(err.find("reload: admin in"), std::string::npos) << err;
  EXPECT_NE(err.find("reload: access_log in"), std::string::npos) << err;

  std::ofstream(env.config_path) << policy_yaml(fake_port, log, "63s");
  EXPECT_TRUE(wait_for([&] { return policy_has(env, "63000"); }, 10000));
  EXPECT_TRUE(policy_has(env, "\"restart_required\":[]"));
  env.stop();
}

// What `cutline policy check` warns about (here a route no request path can equal) is logged
// once at start and again on every reload that is applied, with its position in the file.
TEST(GatewayReload, PolicyWarningsAreLoggedAtStartAndOnEveryReload) {
  GatewayEnv env;
  uint16_t fake_port = 0;
  std::string log;
  auto with_route = [&](const std::string& route, const std::string& deadline) {
    std::string yaml = policy_yaml(fake_port, log, deadline);
    yaml.replace(yaml.find("match: {}"), 9, "match: {routes: [\"" + route + "\", \"*\"]}");
    return yaml;
  };
  ASSERT_TRUE(env.start([&](uint16_t port, const std::string& l) {
    fake_port = port;
    log = l;
    return with_route("/v1/chat/completions/", "61s");
  })) << env.error;
  const std::string at_start =
      "warning: policies[0].match.routes[0]: no request path can match "
      "\"/v1/chat/completions/\"";
  std::string err = read_file(env.dir + "/gateway.err");
  ASSERT_NE(err.find(at_start), std::string::npos) << err;
  EXPECT_EQ(err.find(at_start), err.rfind(at_start)) << "logged once: " << err;

  std::ofstream(env.config_path) << with_route("/v1//embeddings", "62s");
  ASSERT_TRUE(wait_for([&] { return policy_has(env, "62000"); }, 10000)) << "not reloaded";
  EXPECT_TRUE(wait_for([&] {
    err = read_file(env.dir + "/gateway.err");
    return err.find("match.routes[0]: no request path can match \"/v1//embeddings\"") !=
           std::string::npos;
  })) << err;
  env.stop();
}

}  // namespace
}  // namespace cutline::test
