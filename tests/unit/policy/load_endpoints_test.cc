// upstreams[i].endpoints and the pool keys (balance, prefix_affinity, health, outlier,
// load_report), and budget_store's map form: values, defaults and errors with positions.
#include <gtest/gtest.h>

#include "policy_test_util.h"

namespace cutline::policy {
namespace {

using testing::load_errors;
using testing::load_ok;

std::string with_upstream(const std::string& upstream) {
  return "listen:\n  - address: 127.0.0.1:8080\n"
         "upstreams:\n  - name: pool\n" +
         upstream + "policies:\n  - name: all\n";
}

TEST(LoadEndpoints, AListOfUrlsWithEveryPoolKey) {
  auto p = load_ok(
      with_upstream("    endpoints: [\"http://10.0.0.1:8081/v1\", \"http://10.0.0.2:8081/v1\"]\n"
                    "    balance: load_aware\n"
                    "    prefix_affinity: {tokens: 64, max_load_factor: 1.5}\n"
                    "    health: {path: /ready, interval: 2s, timeout: 500ms, panic_threshold: 0}\n"
                    "    outlier: {consecutive_failures: 3, base_ejection: 10s, max_ejection: 1m,"
                    " max_ejection_percent: 100}\n"
                    "    load_report: {from: vllm, interval: 250ms}\n"
                    "    response_head_timeout: 2s\n"));
  ASSERT_TRUE(p);
  const Upstream& u = p->upstreams[0];
  ASSERT_EQ(u.endpoints.size(), 2u);
  EXPECT_EQ(u.endpoints[1].host, "10.0.0.2");
  EXPECT_EQ(u.endpoints[1].port, 8081);
  EXPECT_EQ(u.endpoints[1].base_path, "/v1");
  EXPECT_EQ(u.host, "10.0.0.1");  // url/host/port mirror the first endpoint
  EXPECT_EQ(u.url, "http://10.0.0.1:8081/v1");
  EXPECT_EQ(u.balance, Balance::kLoadAware);
  ASSERT_TRUE(u.prefix_affinity);
  EXPECT_EQ(u.prefix_affinity->unit, AffinityUnit::kTokens);
  EXPECT_EQ(u.prefix_affinity->length, 64);
  EXPECT_DOUBLE_EQ(u.prefix_affinity->max_load_factor, 1.5);
  ASSERT_TRUE(u.health);
  EXPECT_EQ(u.health->path, "/ready");
  EXPECT_EQ(u.health->interval_ms, 2000);
  EXPECT_EQ(u.health->timeout_ms, 500);
  ASSERT_TRUE(u.outlier);
  EXPECT_EQ(u.outlier->consecutive_failures, 3);
  EXPECT_EQ(u.outlier->base_ejection_ms, 10000);
  EXPECT_EQ(u.outlier->max_ejection_ms, 60000);
  EXPECT_EQ(u.outlier->max_ejection_percent, 100);
  EXPECT_EQ(u.health->panic_threshold, 0);
  EXPECT_EQ(u.response_head_timeout_ms, 2000);
  EXPECT_EQ(u.load_report.kind, LoadReportKind::kVllm);
  EXPECT_EQ(u.load_report.interval_ms, 250);
  EXPECT_EQ(u.load_report.stale_after_ms, 750);  // three intervals by default
}

TEST(LoadEndpoints, PoolsCheckHealthAndEjectByDefaultASingleUrlDoesNot) {
  auto p = load_ok(
      "listen:\n  - address: 127.0.0.1:8080\n"
      "upstreams:\n"
      "  - name: pool\n    endpoints: [\"http://10.0.0.1:1\"]\n"
      "  - name: one\n    url: http://10.0.0.9:1\n    models: [x]\n"
      "policies:\n  - name: all\n");
  ASSERT_TRUE(p);
  const Upstream& pool = p->upstreams[0];
  EXPECT_EQ(pool.balance, Balance::kLeastRequest);
  ASSERT_TRUE(pool.health);
  EXPECT_EQ(pool.health->path, "/health");  // what vLLM, SGLang, TGI and llama.cpp answer
  EXPECT_EQ(pool.health->interval_ms, 5000);
  EXPECT_EQ(pool.health->panic_threshold, 50);
  ASSERT_TRUE(pool.outlier);
  EXPECT_EQ(pool.outlier->consecutive_failures, 5);
  EXPECT_EQ(pool.load_report.kind, LoadReportKind::kNone);
  EXPECT_FALSE(pool.prefix_affinity);
  const Upstream& one = p->upstreams[1];
  ASSERT_EQ(one.endpoints.size(), 1u);  // a single url is a pool of one
  EXPECT_EQ(one.endpoints[0].host, "10.0.0.9");
  EXPECT_FALSE(one.health);
  EXPECT_FALSE(one.outlier);
}

TEST(LoadEndpoints, ADnsNameIsResolvedLater) {
  auto p = load_ok(with_upstream(
      "    endpoints: {dns: \"backend.cutline.svc.cluster.local:8081\", resolve_interval: 10s,"
      " path: /v1}\n"
      "    load_report: cutline\n"
      "    health: off\n"));
  ASSERT_TRUE(p);
  const Upstream& u = p->upstreams[0];
  ASSERT_TRUE(u.dns);
  EXPECT_TRUE(u.endpoints.empty());
  EXPECT_EQ(u.dns->name, "backend.cutline.svc.cluster.local");
  EXPECT_EQ(u.dns->port, 8081);
  EXPECT_EQ(u.dns->base_path, "/v1");
  EXPECT_EQ(u.dns->resolve_interval_ms, 10000);
  EXPECT_EQ(u.url, "http://backend.cutline.svc.cluster.local:8081/v1");
  EXPECT_EQ(u.load_report.kind, LoadReportKind::kCutline);
  EXPECT_EQ(u.load_report.interval_ms, 1000);
  EXPECT_FALSE(u.health);
}

TEST(LoadEndpoints, ErrorsNameTheKeyLineAndColumn) {
  std::string out =
      load_errors(with_upstream("    url: http://a:1\n"
                                "    endpoints: [\"http://b:1\"]\n"));
  EXPECT_NE(out.find("cutline.yaml:6:5: upstreams[0].endpoints: give either \"url\""),
            std::string::npos)
      << out;

  out = load_errors(with_upstream(
      "    endpoints: [\"http://a:1\", \"h2c://b:1\", \"http://a:1\", \"ftp://c\"]\n"));
  EXPECT_NE(out.find("upstreams[0].endpoints[1]: every endpoint of an upstream must use the same "
                     "scheme"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("upstreams[0].endpoints[2]: duplicate endpoint \"http://a:1\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("upstreams[0].endpoints[3]: unsupported scheme \"ftp\""), std::string::npos)
      << out;

  out = load_errors(with_upstream("    endpoints: []\n"));
  EXPECT_NE(out.find("cutline.yaml:5:16: upstreams[0].endpoints: must list at least one"),
            std::string::npos)
      << out;

  out = load_errors(with_upstream("    endpoints: {dns: \"no port here\"}\n"));
  EXPECT_NE(out.find("upstreams[0].endpoints.dns: expected NAME:PORT"), std::string::npos) << out;

  out =
      load_errors(with_upstream("    endpoints: [\"http://a:1\"]\n"
                                "    balance: load_aware\n"));
  EXPECT_NE(out.find("cutline.yaml:6:14: upstreams[0].balance: load_aware needs load_report"),
            std::string::npos)
      << out;

  out =
      load_errors(with_upstream("    endpoints: [\"http://a:1\"]\n"
                                "    balance: fastest\n"
                                "    prefix_affinity: {bytes: 100, tokens: 3}\n"
                                "    outlier: {base_ejection: 1m, max_ejection: 10s}\n"
                                "    load_report: {from: sglang}\n"
                                "    health: {timeout: 10s, interval: 1s}\n"));
  EXPECT_NE(out.find("upstreams[0].balance: "), std::string::npos) << out;
  EXPECT_NE(out.find("upstreams[0].prefix_affinity: give exactly one of"), std::string::npos)
      << out;
  EXPECT_NE(out.find("upstreams[0].outlier: max_ejection must be at least base_ejection"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("upstreams[0].load_report.from: "), std::string::npos) << out;
  EXPECT_NE(out.find("upstreams[0].health: timeout must not exceed interval"), std::string::npos)
      << out;

  out =
      load_errors(with_upstream("    endpoints: [\"http://a:1\"]\n"
                                "    prefix_affinity: {bytes: 0, max_load_factor: 0.5}\n"));
  EXPECT_NE(out.find("upstreams[0].prefix_affinity.bytes: must be a positive integer"),
            std::string::npos)
      << out;

  out =
      load_errors(with_upstream("    endpoints: [\"http://a:1\"]\n"
                                "    prefix_affinity: {bytes: 10, max_load_factor: lots}\n"));
  EXPECT_NE(out.find("upstreams[0].prefix_affinity.max_load_factor: expected a number, got "
                     "\"lots\""),
            std::string::npos)
      << out;

  out =
      load_errors(with_upstream("    endpoints: [\"http://a:1\"]\n"
                                "    outlier: {max_ejection_percent: 150}\n"
                                "    health: {panic_threshold: 101}\n"
                                "    response_head_timeout: 0s\n"));
  EXPECT_NE(out.find("upstreams[0].outlier.max_ejection_percent: must be at most 100, got 150"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("upstreams[0].health.panic_threshold: must be at most 100, got 101"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("upstreams[0].response_head_timeout: must be a positive duration"),
            std::string::npos)
      << out;

  out =
      load_errors(with_upstream("    endpoints: [\"http://a:1\", \"http://b:1\"]\n"
                                "    spawn: {command: [cutline-backend]}\n"));
  EXPECT_NE(out.find("upstreams[0].spawn: spawn starts one process"), std::string::npos) << out;
}

TEST(LoadBudgetStore, TheMapFormReadsCredentialsFromTheEnvironment) {
  LoadOptions o;
  o.env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "REDIS_PASSWORD") return std::string("s3cret");
    return std::nullopt;
  };
  auto p = load_ok(with_upstream("    url: http://a:1\n") +
                       "budget_store: {url: \"redis://redis:6380/1\", user: cutline, password: "
                       "\"env:REDIS_PASSWORD\", on_error: closed, timeout: 80ms, "
                       "reservation_ttl: 5m}\n",
                   o);
  ASSERT_TRUE(p);
  const BudgetStore& b = p->budget_store;
  EXPECT_EQ(b.kind, BudgetStoreKind::kRedis);
  EXPECT_EQ(b.host, "redis");
  EXPECT_EQ(b.port, 6380);
  EXPECT_EQ(b.db, 1);
  EXPECT_EQ(b.user, "cutline");
  EXPECT_EQ(b.password, "s3cret");
  EXPECT_TRUE(b.fail_closed);
  EXPECT_EQ(b.timeout_ms, 80);
  EXPECT_EQ(b.reservation_ttl_ms, 300000);

  auto plain = load_ok(with_upstream("    url: http://a:1\n") + "budget_store: redis://r\n");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->budget_store.fail_closed);  // fail open by default
  EXPECT_EQ(plain->budget_store.reservation_ttl_ms, 900000);
}

TEST(LoadBudgetStore, RedissIsTlsWithItsOwnVerificationSettings) {
  auto plain = load_ok(with_upstream("    url: http://a:1\n") + "budget_store: rediss://r:6380\n");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->budget_store.kind, BudgetStoreKind::kRedis);
  EXPECT_TRUE(plain->budget_store.use_tls);
  EXPECT_EQ(plain->budget_store.port, 6380);
  EXPECT_TRUE(plain->budget_store.tls.ca_file.empty());  // the system's CAs
  EXPECT_TRUE(plain->budget_store.tls.verify);

  auto p = load_ok(with_upstream("    url: http://a:1\n") +
                   "budget_store:\n"
                   "  url: rediss://redis.internal/2\n"
                   "  tls: {ca_file: /etc/ssl/redis-ca.pem, cert: /etc/ssl/gw.pem, key: "
                   "/etc/ssl/gw.key, server_name: redis-0.redis}\n");
  ASSERT_TRUE(p);
  const BudgetStore& b = p->budget_store;
  EXPECT_TRUE(b.use_tls);
  EXPECT_EQ(b.host, "redis.internal");
  EXPECT_EQ(b.port, 6379);
  EXPECT_EQ(b.db, 2);
  EXPECT_EQ(b.tls.ca_file, "/etc/ssl/redis-ca.pem");
  EXPECT_EQ(b.tls.cert_file, "/etc/ssl/gw.pem");
  EXPECT_EQ(b.tls.key_file, "/etc/ssl/gw.key");
  EXPECT_EQ(b.tls.server_name, "redis-0.redis");

  std::string out = load_errors(with_upstream("    url: http://a:1\n") +
                                "budget_store: {url: \"redis://r\", tls: {ca_file: /ca.pem}}\n");
  EXPECT_NE(out.find("budget_store.tls: applies to rediss:// stores only"), std::string::npos)
      << out;
  out = load_errors(with_upstream("    url: http://a:1\n") +
                    "budget_store: {url: \"rediss://r\", tls: {cert: /gw.pem}}\n");
  EXPECT_NE(out.find("cert and key must be given together"), std::string::npos) << out;
  out = load_errors(with_upstream("    url: http://a:1\n") +
                    "budget_store: {url: \"rediss://r\", tls: {verify: maybe}}\n");
  EXPECT_NE(out.find("budget_store.tls.verify"), std::string::npos) << out;
}

TEST(LoadBudgetStore, SecretsAreNeverEchoed) {
  LoadOptions o;
  o.env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  std::string out = load_errors(with_upstream("    url: http://a:1\n") +
                                    "budget_store: {url: \"redis://r\", password: hunter2}\n",
                                o);
  EXPECT_NE(out.find("budget_store.password: a secret must be \"env:VARNAME\" or \"file:PATH\""),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("hunter2"), std::string::npos) << out;
  out = load_errors(with_upstream("    url: http://a:1\n") +
                        "budget_store: {url: \"redis://r\", password: \"env:NOPE\"}\n",
                    o);
  EXPECT_NE(out.find("budget_store.password: environment variable NOPE is not set"),
            std::string::npos)
      << out;
  out = load_errors(with_upstream("    url: http://a:1\n") +
                    "budget_store: {url: memory, on_error: closed}\n");
  EXPECT_NE(out.find("budget_store.on_error: applies to redis:// stores only"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace cutline::policy
