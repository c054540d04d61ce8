// Two gateway replicas with the same `budget_store: redis://…` draw from one tenant pool: while
// a request on the first holds the whole pool, the second refuses the same tenant (429 with a
// stop record naming the pool and Retry-After); once the first ends, its refund is seen by the
// second. With `budget_store: memory` (the control) each replica has its own pool and the
// second request passes. Redis unreachable at start: the gateway still serves (fail open), or
// refuses with a labeled 503 (on_error: closed). Redis slow: the pool step waits for it off the
// event loop, and a stream already relaying on the same worker keeps its token timing. The
// same pool shared over TLS (`rediss://`, Redis's certificate verified against a CA file).

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../unit/proto/tls_test_util.h"
#include "gateway_harness.h"
#include "support/ci.h"
#include "support/redis_server.h"

namespace cutline::test {
namespace {

// printf %s sk-alice-example | sha256sum
constexpr const char* kAliceDigest =
    "d48fce52832c460238fb82e9f6c57be593ad27ea6ddb5e15d74d1fb4245a76cd";

// A tenant pool of 600 tokens per minute that one request (max_tokens 600) empties; rejected
// requests get 429 rather than a clamp.
std::string policy_yaml(uint16_t fake_port, const std::string& log,
                        const std::string& budget_store) {
  return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
         "access_log: " +
         log + "\nbudget_store: " + budget_store +
         "\n"
         "upstreams:\n  - name: fake\n    url: http://127.0.0.1:" +
         std::to_string(fake_port) +
         "\n    models: [\"fake\"]\n"
         "tenants:\n  - name: alice\n    api_keys: [\"sha256:" +
         kAliceDigest +
         "\"]\n"
         "policies:\n  - name: default\n    match: {}\n"
         "    budget:\n      max_output_tokens: 600\n      tenant_tokens_per_minute: 600\n"
         "      on_pool_exhausted: reject\n";
}

std::string chat_body() {
  return R"({"model":"fake","max_tokens":600,"stream":true,"messages":[{"role":"user","content":"hi"}]})";
}

proto::HttpResponse post(const GatewayEnv& env, const std::string& script) {
  proto::HttpHeaders h{{"Content-Type", "application/json"},
                       {"Authorization", "Bearer sk-alice-example"},
                       {"X-Fake-Script", script}};
  auto r = proto::http_fetch(env.url("/v1/chat/completions"), "POST", h, chat_body(), 10000);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : proto::HttpResponse{};
}

// Starts a stream on `env` that has sent its first token and then stalls (so it holds its
// reservation of the whole pool) and returns once that token arrived.
void hold_the_pool(RawClient& client) {
  client.post("/v1/chat/completions", chat_body(),
              "Authorization: Bearer sk-alice-example\r\n"
              "X-Fake-Script: tokens=50,stall_at=1,stall_ms=20000\r\n");
  const std::string got = client.read_until("\"content\":\"", 10000);
  ASSERT_NE(got.find("\"content\":\""), std::string::npos) << got;
}

class GatewaySharedPool : public ::testing::Test {
 protected:
  // Redis listens on a plain port and, with its own self-signed certificate, a TLS port.
  static void SetUpTestSuite() {
    certs_dir_ = new proto::testing::TempDir();
    redis_cert_ = proto::testing::make_self_signed(*certs_dir_, "redis");
    const RedisTls tls{redis_cert_.cert, redis_cert_.key, redis_cert_.cert};
    redis_ = new RedisServer();
    if (!redis_->start(0, &tls)) {
      skip_why_ = new std::string(redis_->error());
    }
  }
  static void TearDownTestSuite() {
    delete redis_;
    redis_ = nullptr;
    delete certs_dir_;
    certs_dir_ = nullptr;
    delete skip_why_;
    skip_why_ = nullptr;
  }
  void SetUp() override {
    if (skip_why_ != nullptr && cutline::test::running_in_ci())
      FAIL() << "CI=true but redis-server could not start: " << *skip_why_;
    if (skip_why_ != nullptr) GTEST_SKIP() << *skip_why_;
    redis_->command({"FLUSHALL"});
  }
  static std::string redis_url() { return "redis://127.0.0.1:" + std::to_string(redis_->port()); }
  static std::string rediss_url() {
    return "rediss://127.0.0.1:" + std::to_string(redis_->tls_port());
  }
  static RedisServer* redis_;
  static std::string* skip_why_;
  static proto::testing::TempDir* certs_dir_;
  static proto::testing::CertFiles redis_cert_;
};
RedisServer* GatewaySharedPool::redis_ = nullptr;
std::string* GatewaySharedPool::skip_why_ = nullptr;
proto::testing::TempDir* GatewaySharedPool::certs_dir_ = nullptr;
proto::testing::CertFiles GatewaySharedPool::redis_cert_;

// n = 2^60 and 2^61 made max_output_tokens x n wrap (to a negative number, or zero) and a
// wrapped reservation went to the Redis script as it was. They are refused as invalid_request
// before any reservation, and the shared pool still serves the whole next request.
TEST_F(GatewaySharedPool, AnAbsurdNNeverReachesTheSharedPool) {
  GatewayEnv a;
  const std::string store = redis_url();
  ASSERT_TRUE(a.start([&](uint16_t port, const std::string& log) {
    return policy_yaml(port, log, store);
  })) << a.error;
  proto::HttpHeaders h{{"Content-Type", "application/json"},
                       {"Authorization", "Bearer sk-alice-example"}};
  for (const char* n : {"1152921504606846976", "2305843009213693952"}) {
    const std::string body = std::string(R"({"model":"fake","max_tokens":600,"n":)") + n +
                             R"(,"messages":[{"role":"user","content":"hi"}]})";
    auto r = proto::http_fetch(a.url("/v1/chat/completions"), "POST", h, body, 10000);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->status, 400) << n << ": " << r->body;
    EXPECT_NE(r->headers.get("Cutline-Stop").value_or("").find("invalid_request"),
              std::string::npos)
        << n;
  }
  // Nothing was taken from (or added to) the pool: the whole 600 is there for one request, and
  // then nothing is.
  auto whole = post(a, "tokens=600");
  EXPECT_EQ(whole.status, 200) << whole.body;
  auto refused = post(a, "tokens=3");
  EXPECT_EQ(refused.status, 429) << refused.body;
}

TEST_F(GatewaySharedPool, ASecondReplicaSeesWhatTheFirstTookAndGaveBack) {
  GatewayEnv a, b;
  const std::string store = redis_url();
  auto yaml = [&](uint16_t port, const std::string& log) { return policy_yaml(port, log, store); };
  ASSERT_TRUE(a.start(yaml)) << a.error;
  ASSERT_TRUE(b.start(yaml)) << b.error;
  EXPECT_NE(read_file(a.dir + "/gateway.err").find("token pools in " + store), std::string::npos);

  RawClient holder(a.port);
  ASSERT_TRUE(holder.connected());
  hold_the_pool(holder);
  // Replica a's reservation is in Redis: replica b refuses the same tenant.
  proto::HttpResponse refused = post(b, "tokens=5");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_NE(refused.body.find("admission_rejected"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("tenant_tokens_per_minute"), std::string::npos) << refused.body;
  EXPECT_TRUE(refused.headers.get("Retry-After").has_value());

  // The client of replica a goes away after one token: a refunds the rest, and b serves the
  // tenant again (the pool needs 600; 599 came back, one more refills within 100 ms).
  holder.close();
  bool served = false;
  EXPECT_TRUE(wait_for(
      [&] {
        served = post(b, "tokens=5").status == 200;
        return served;
      },
      5000));
  a.stop();
  b.stop();
}

TEST_F(GatewaySharedPool, ReplicasShareThePoolOverTls) {
  GatewayEnv a, b;
  const std::string store =
      "{url: \"" + rediss_url() + "\", tls: {ca_file: \"" + redis_cert_.cert + "\"}}";
  auto yaml = [&](uint16_t port, const std::string& log) { return policy_yaml(port, log, store); };
  ASSERT_TRUE(a.start(yaml)) << a.error;
  ASSERT_TRUE(b.start(yaml)) << b.error;
  // At start each replica asked Redis over TLS, and it answered.
  const std::string started = read_file(a.dir + "/gateway.err");
  EXPECT_NE(started.find("token pools in " + rediss_url() + "\n"), std::string::npos) << started;

  RawClient holder(a.port);
  ASSERT_TRUE(holder.connected());
  hold_the_pool(holder);
  proto::HttpResponse refused = post(b, "tokens=5");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_NE(refused.body.find("tenant_tokens_per_minute"), std::string::npos) << refused.body;
  // The bucket is in Redis (read over its plain port), and nothing fell back to a local pool.
  auto keys = redis_->command({"KEYS", "cutline:pool:*"});
  ASSERT_TRUE(keys);
  EXPECT_GE(keys->elements, 1u);
  for (GatewayEnv* env : {&a, &b}) {
    auto metrics = proto::http_fetch(env->admin_url("/metrics"), "GET", {}, "", 5000);
    ASSERT_TRUE(metrics.ok());
    EXPECT_NE(metrics->body.find("\ncutline_budget_store_errors_total 0"), std::string::npos);
  }
  holder.close();
  a.stop();
  b.stop();
}

// The control: without a shared store each replica has a full pool of its own.
TEST_F(GatewaySharedPool, WithMemoryPoolsEachReplicaHasItsOwn) {
  GatewayEnv a, b;
  auto yaml = [](uint16_t port, const std::string& log) {
    return policy_yaml(port, log, "memory");
  };
  ASSERT_TRUE(a.start(yaml)) << a.error;
  ASSERT_TRUE(b.start(yaml)) << b.error;
  RawClient holder(a.port);
  ASSERT_TRUE(holder.connected());
  hold_the_pool(holder);
  EXPECT_EQ(post(b, "tokens=5").status, 200);
  EXPECT_EQ(post(a, "tokens=5").status, 429);  // a's own pool is held
  holder.close();
  a.stop();
  b.stop();
}

TEST_F(GatewaySharedPool, AnUnreachableRedisFailsOpen) {
  GatewayEnv a;
  const std::string store = "redis://127.0.0.1:" + std::to_string(free_port());
  auto yaml = [&](uint16_t port, const std::string& log) { return policy_yaml(port, log, store); };
  ASSERT_TRUE(a.start(yaml)) << a.error;
  proto::HttpResponse r = post(a, "tokens=5");
  EXPECT_EQ(r.status, 200) << r.body;
  const std::string err = read_file(a.dir + "/gateway.err");
  EXPECT_NE(err.find("not answering yet"), std::string::npos) << err;
  EXPECT_NE(err.find("fail open"), std::string::npos) << err;
  // The calls served locally are counted on /metrics (take and refund of that request).
  auto m = proto::http_fetch(a.admin_url("/metrics"), "GET", {}, "", 5000);
  ASSERT_TRUE(m.ok());
  const std::string key = "\ncutline_budget_store_errors_total ";
  const size_t at = m->body.find(key);
  ASSERT_NE(at, std::string::npos) << m->body;
  EXPECT_GE(std::atof(m->body.c_str() + at + key.size()), 1.0) << m->body.substr(at, 60);
  a.stop();
}

TEST_F(GatewaySharedPool, AnUnreachableRedisFailsClosedWhenConfiguredSo) {
  GatewayEnv a;
  const std::string store = "{url: \"redis://127.0.0.1:" + std::to_string(free_port()) +
                            "\", on_error: closed, timeout: 300ms}";
  auto yaml = [&](uint16_t port, const std::string& log) { return policy_yaml(port, log, store); };
  ASSERT_TRUE(a.start(yaml)) << a.error;
  proto::HttpResponse r = post(a, "tokens=5");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("\"cause\":\"admission_rejected\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"rule\":\"budget_store.on_error\""), std::string::npos) << r.body;
  EXPECT_TRUE(r.headers.get("Retry-After").has_value());
  const std::string err = read_file(a.dir + "/gateway.err");
  EXPECT_NE(err.find("fail closed"), std::string::npos) << err;
  auto m = proto::http_fetch(a.admin_url("/metrics"), "GET", {}, "", 5000);
  ASSERT_TRUE(m.ok());
  const std::string key = "\ncutline_budget_store_errors_total ";
  const size_t at = m->body.find(key);
  ASSERT_NE(at, std::string::npos) << m->body;
  EXPECT_GE(std::atof(m->body.c_str() + at + key.size()), 1.0) << m->body.substr(at, 60);
  a.stop();
}

// One worker loop serves both streams. Stream A relays a token every 20 ms under a 1 s idle
// timeout; then Redis stalls for 2.5 s and request B arrives on the same worker: B's pool step
// waits for Redis (up to budget_store.timeout, 1.5 s, then fail open), and A — whose loop a
// blocking Redis call would freeze for those 1.5 s, cutting it gateway_idle_timeout — keeps its
// cadence and ends eos. (The 800 ms bound on A's gaps leaves room for a loaded machine.)
TEST_F(GatewaySharedPool, ASlowRedisDoesNotDelayOtherStreams) {
  GatewayEnv a;
  a.gateway_args = {"--workers", "1"};
  const std::string store = "{url: \"" + redis_url() + "\", timeout: 1500ms}";
  auto yaml = [&](uint16_t port, const std::string& log) {
    std::string y = policy_yaml(port, log, store);
    const std::string pool = "tenant_tokens_per_minute: 600\n";
    y.replace(y.find(pool), pool.size(), "tenant_tokens_per_minute: 100000\n");
    return y + "    idle_timeout: 1s\n";
  };
  ASSERT_TRUE(a.start(yaml)) << a.error;

  RawClient stream_a(a.port);
  ASSERT_TRUE(stream_a.connected());
  stream_a.post("/v1/chat/completions", chat_body(),
                "Authorization: Bearer sk-alice-example\r\n"
                "X-Fake-Script: tokens=250,interval_ms=20\r\n");
  ASSERT_NE(stream_a.read_until("\"content\":\"", 10000).find("\"content\":\""), std::string::npos);

  using Clock = std::chrono::steady_clock;
  std::thread staller([&] { redis_->stall(2500); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the script is running
  Clock::duration b_took{};
  int b_status = 0;
  std::thread request_b([&] {
    const auto t0 = Clock::now();
    b_status = post(a, "tokens=5").status;
    b_took = Clock::now() - t0;
  });

  // Stream A's bytes as they arrive: the longest wait between two reads that brought data.
  std::string got;
  auto last = Clock::now();
  Clock::duration max_gap{};
  const auto end = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < end && got.find("[DONE]") == std::string::npos) {
    const std::string now_have = stream_a.read_until("\x01never", 1);
    if (now_have.size() > got.size()) {
      const auto t = Clock::now();
      max_gap = std::max(max_gap, t - last);
      last = t;
      got = now_have;
    }
  }
  request_b.join();
  staller.join();

  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  std::printf("stream A's longest gap %lld ms while request B waited %lld ms for Redis\n",
              static_cast<long long>(duration_cast<milliseconds>(max_gap).count()),
              static_cast<long long>(duration_cast<milliseconds>(b_took).count()));
  EXPECT_EQ(b_status, 200);  // served from this gateway's own pools (fail open)
  EXPECT_GE(duration_cast<milliseconds>(b_took).count(), 1400) << "Redis was not slow for B";
  EXPECT_LT(duration_cast<milliseconds>(max_gap).count(), 800) << "stream A stalled";
  EXPECT_NE(got.find("[DONE]"), std::string::npos)
      << got.substr(got.size() > 600 ? got.size() - 600 : 0);
  EXPECT_NE(got.find("\"cause\":\"eos\""), std::string::npos)
      << got.substr(got.size() > 600 ? got.size() - 600 : 0);
  a.stop();
}

}  // namespace
}  // namespace cutline::test
