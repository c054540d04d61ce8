// AsyncRedisPoolStore against a private redis-server: reservations atomic across two stores,
// refunded by expiry when never settled, AUTH with an ACL user, EVALSHA's fallback to EVAL,
// fail open / fail closed, TLS (rediss://: the server's certificate verified, a client
// certificate when Redis asks for one), and — the point of it — an event loop that keeps running
// while Redis is slow (a script keeps Redis busy, as DEBUG SLEEP would). Without redis-server the
// tests are skipped, except under CI=true where they fail.
#include "cutline/gateway/async_redis_pool_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../proto/tls_test_util.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/timer.h"
#include "cutline/proto/tls/tls_context.h"
#include "support/ci.h"
#include "support/redis_server.h"
#include "support/wait_for.h"

namespace cutline::gateway {
namespace {

using test::RedisServer;

RedisServer* shared_redis() {
  static RedisServer server;
  static const bool started = server.start();
  (void)started;
  return &server;
}

// An EventLoop on its own thread; call() runs a function there and waits for its result.
class LoopThread {
 public:
  LoopThread() : thread_([this] { loop_.run(); }) {}
  ~LoopThread() {
    loop_.stop();
    thread_.join();
  }
  template <typename F>
  auto call(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto fut = task.get_future();
    loop_.post([&task] { task(); });
    return fut.get();
  }
  proto::EventLoop& loop() { return loop_; }

 private:
  proto::EventLoop loop_;
  std::thread thread_;
};

struct Outcome {
  policy::PoolTake take;
  ReservationSource source = ReservationSource::kLocal;
  std::string id;
  int64_t elapsed_ms = 0;
};

// A store on its own loop thread, and the reservations it handed out (kept on that thread).
class StoreThread {
 public:
  StoreThread(AsyncRedisOptions o, policy::PoolStore& fallback) {
    o.log = [this](const std::string& line) {
      log_lines.fetch_add(1);
      std::lock_guard lock(log_mu_);
      last_log_ = line;
    };
    store_ = lt_.call(
        [&] { return std::make_unique<AsyncRedisPoolStore>(lt_.loop(), o, clock_, fallback); });
  }
  ~StoreThread() {
    lt_.call([&] {
      held_.clear();
      store_.reset();
      return 0;
    });
  }
  // Starts a reserve and waits for its answer; the reservation stays held until settle().
  Outcome reserve(const policy::PoolSpec& spec, int64_t want, int64_t min) {
    std::promise<Outcome> p;
    const auto start = std::chrono::steady_clock::now();
    lt_.call([&] {
      store_->reserve(spec, want, min, [&, start](AsyncReservation r) {
        Outcome o{r.take(), r.source(), r.id(), 0};
        o.elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
        held_.push_back(std::move(r));
        p.set_value(o);
      });
      return 0;
    });
    return p.get_future().get();
  }
  void settle_all(int64_t used) {
    lt_.call([&] {
      for (auto& r : held_) r.settle(used);
      held_.clear();
      return 0;
    });
  }
  void forget_all() {  // a crashed gateway: nothing is settled
    lt_.call([&] {
      for (auto& r : held_) r.abandon();
      held_.clear();
      return 0;
    });
  }
  uint64_t errors() {
    return lt_.call([&] { return store_->errors_total(); });
  }
  LoopThread& loop() { return lt_; }
  std::atomic<int> log_lines{0};
  std::string last_log() {
    std::lock_guard lock(log_mu_);
    return last_log_;
  }

 private:
  std::mutex log_mu_;
  std::string last_log_;
  base::MonotonicClock clock_;
  LoopThread lt_;
  std::unique_ptr<AsyncRedisPoolStore> store_;
  std::vector<AsyncReservation> held_;
};

class AsyncRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = shared_redis();
    if (server_->port() == 0 || !server_->command({"PING"})) {
      const char* ci = std::getenv("CI");
      if (ci && std::string(ci) == "true") FAIL() << "CI needs redis-server: " << server_->error();
      GTEST_SKIP() << server_->error();
    }
    server_->command({"FLUSHALL"});
  }
  AsyncRedisOptions options(uint16_t port = 0) const {
    AsyncRedisOptions o;
    o.port = port ? port : server_->port();
    o.timeout_ms = 2000;
    return o;
  }
  double bucket_tokens(const std::string& key) {
    auto r = server_->command({"HGET", "cutline:pool:" + key, "t"});
    if (!r || r->type == REDIS_REPLY_NIL) return -1;  // absent: full
    return std::stod(std::string(r->str, r->len));
  }

  RedisServer* server_ = nullptr;
  base::MonotonicClock clock_;
  policy::MemoryPoolStore local_{clock_};
};

TEST_F(AsyncRedisTest, TwoGatewaysNeverOverspendOneBucketAndSettleRefundsTheRest) {
  StoreThread a(options(), local_), b(options(), local_);
  const policy::PoolSpec spec{"global/all", 1000};
  std::atomic<int64_t> granted{0};
  auto run = [&](StoreThread& s) {
    for (int i = 0; i < 80; ++i) {
      Outcome o = s.reserve(spec, 10, 10);
      EXPECT_EQ(o.source, ReservationSource::kShared);
      granted += o.take.granted_tokens;
    }
  };
  std::thread ta([&] { run(a); });
  std::thread tb([&] { run(b); });
  ta.join();
  tb.join();
  // 1000 tokens plus what refilled meanwhile (1000/min): never the 1600 asked for.
  EXPECT_GE(granted.load(), 1000);
  EXPECT_LE(granted.load(), 1000 + 60);
  a.settle_all(2);
  b.settle_all(2);
  test::wait_for(
      [&] {
        return server_->command({"ZCARD", "cutline:pool:global/all:r"})->integer == 0;
      },
      1000, 10);
  EXPECT_EQ(server_->command({"ZCARD", "cutline:pool:global/all:r"})->integer, 0);
  // Each reservation used 2 of its 10: 80% of the grants came back.
  double t = bucket_tokens("global/all");
  if (t < 0) t = 1000;  // deleted: full
  EXPECT_GE(t, 1000 - 0.2 * granted.load() - 1);
}

TEST_F(AsyncRedisTest, ReservationsOfACrashedGatewayAreRefundedWhenTheyExpire) {
  const policy::PoolSpec spec{"tenant/r/alice", 60};  // one token a second
  {
    AsyncRedisOptions o = options();
    o.reservation_ttl_ms = 1000;
    StoreThread crashed(o, local_);
    EXPECT_EQ(crashed.reserve(spec, 50, 50).take.granted_tokens, 50);
    crashed.forget_all();
  }
  StoreThread other(options(), local_);
  Outcome refused = other.reserve(spec, 50, 50);
  EXPECT_EQ(refused.take.granted_tokens, 0);
  EXPECT_GT(refused.take.retry_after_ms, 30000);  // ~40 tokens short at 1/s
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  Outcome after = other.reserve(spec, 50, 50);  // the expired 50 came back
  EXPECT_EQ(after.take.granted_tokens, 50);
}

TEST_F(AsyncRedisTest, ASlowRedisLeavesTheEventLoopFree) {
  StoreThread s(options(), local_);
  const policy::PoolSpec spec{"global/slow", 1000};
  EXPECT_EQ(s.reserve(spec, 1, 1).source, ReservationSource::kShared);  // connected
  // A periodic 5 ms timer on the store's loop stands for the other streams of the worker.
  std::atomic<int64_t> max_gap_us{0}, ticks{0};
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  std::unique_ptr<proto::Timer> ticker = s.loop().call([&] {
    auto t = std::make_unique<proto::Timer>(s.loop().loop(), [&, last] {
      const auto now = std::chrono::steady_clock::now();
      if (ticks++ > 0) {
        const int64_t gap =
            std::chrono::duration_cast<std::chrono::microseconds>(now - *last).count();
        if (gap > max_gap_us) max_gap_us = gap;
      }
      *last = now;
    });
    t->arm_periodic(5);
    return t;
  });
  // Long enough that the stall has surely begun 200 ms later, even on a loaded machine.
  std::thread sleeper([&] { server_->stall(1200); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // Redis is busy now
  Outcome o = s.reserve(spec, 10, 10);
  sleeper.join();
  EXPECT_EQ(o.source, ReservationSource::kShared);
  EXPECT_GE(o.elapsed_ms, 400);  // it waited for Redis...
  EXPECT_GT(ticks.load(), 20);   // ...while the loop kept ticking (~100 on an idle machine)
  // A blocking call would stall it for the whole ~1000 ms; allow for a loaded test machine.
  EXPECT_LT(max_gap_us.load(), 200000) << "the loop stalled for " << max_gap_us.load() << " us";
  s.loop().call([&] {
    ticker.reset();
    return 0;
  });
}

TEST_F(AsyncRedisTest, ATimedOutReserveFallsBackAndItsLateGrantIsGivenBack) {
  AsyncRedisOptions o = options();
  o.timeout_ms = 100;
  StoreThread s(o, local_);
  const policy::PoolSpec spec{"global/late", 600};
  // Connected and the script cached (a loaded machine may need more than one 100 ms try).
  ASSERT_TRUE(test::wait_for(
      [&] { return s.reserve(spec, 1, 1).source == ReservationSource::kShared; }, 8000, 100));
  s.settle_all(0);
  // Long enough that the stall has surely begun 200 ms later, even on a loaded machine.
  std::thread sleeper([&] { server_->stall(1500); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Outcome late = s.reserve(spec, 100, 100);
  EXPECT_EQ(late.source, ReservationSource::kLocal);  // fail open: this process's bucket
  EXPECT_EQ(late.take.granted_tokens, 100);
  EXPECT_LT(late.elapsed_ms, 800);  // the 100 ms timeout, not the rest of Redis's stall
  sleeper.join();
  EXPECT_GE(s.errors(), 1u);
  // Redis ran the reserve after its sleep; the store gave the 100 tokens straight back.
  test::wait_for(
      [&] {
        return server_->command({"ZCARD", "cutline:pool:global/late:r"})->integer == 0;
      },
      1000, 10);
  EXPECT_EQ(server_->command({"ZCARD", "cutline:pool:global/late:r"})->integer, 0);
  const double t = bucket_tokens("global/late");
  EXPECT_TRUE(t < 0 || t > 590) << t;
}

TEST_F(AsyncRedisTest, RedisDownFailsOpenOrClosedAsConfigured) {
  const uint16_t nobody = test::free_port();
  const policy::PoolSpec spec{"global/down", 100};
  {
    StoreThread open(options(nobody), local_);
    Outcome o = open.reserve(spec, 30, 30);
    EXPECT_EQ(o.source, ReservationSource::kLocal);
    EXPECT_EQ(o.take.granted_tokens, 30);
    EXPECT_GE(open.errors(), 1u);
    EXPECT_GE(open.log_lines.load(), 1);
  }
  AsyncRedisOptions closed_options = options(nobody);
  closed_options.fail_closed = true;
  StoreThread closed(closed_options, local_);
  Outcome c = closed.reserve(spec, 30, 30);
  EXPECT_EQ(c.source, ReservationSource::kRefused);
  EXPECT_EQ(c.take.granted_tokens, 0);
  EXPECT_GT(c.take.retry_after_ms, 0);
  Outcome again = closed.reserve(spec, 30, 30);  // inside the back-off: no new attempt
  EXPECT_EQ(again.source, ReservationSource::kRefused);
}

TEST_F(AsyncRedisTest, AuthenticatesAsAnAclUserAndScriptsSurviveAFlush) {
  ASSERT_TRUE(server_->command({"ACL", "SETUSER", "cutline", "on", ">pw", "~*", "+@all"}));
  const policy::PoolSpec spec{"global/auth", 100};
  AsyncRedisOptions o = options();
  o.user = "cutline";
  o.password = "pw";
  StoreThread good(o, local_);
  EXPECT_EQ(good.reserve(spec, 5, 5).source, ReservationSource::kShared);
  server_->command({"SCRIPT", "FLUSH"});  // EVALSHA answers NOSCRIPT: EVAL takes over
  EXPECT_EQ(good.reserve(spec, 5, 5).source, ReservationSource::kShared);
  o.password = "wrong";
  StoreThread bad(o, local_);
  EXPECT_EQ(bad.reserve(spec, 5, 5).source, ReservationSource::kLocal);
  EXPECT_GE(bad.errors(), 1u);
  server_->command({"ACL", "DELUSER", "cutline"});
}

// A redis-server that also listens for TLS, with its own self-signed certificate (its own CA).
class AsyncRedisTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_cert_ = proto::testing::make_self_signed(dir_, "redis");
    client_cert_ = proto::testing::make_self_signed(dir_, "gateway");
    test::RedisTls tls{server_cert_.cert, server_cert_.key, client_cert_.cert,
                       /*require_client_cert=*/false};
    if (!server_.start(0, &tls)) {
      if (test::running_in_ci()) FAIL() << "CI needs redis-server: " << server_.error();
      GTEST_SKIP() << server_.error();
    }
  }
  // A rediss:// store's options as the gateway builds them from the policy.
  AsyncRedisOptions tls_options(const std::string& ca_file, const std::string& cert = "",
                                const std::string& key = "") {
    policy::BudgetStore store;
    store.kind = policy::BudgetStoreKind::kRedis;
    store.url = "rediss://127.0.0.1:" + std::to_string(server_.tls_port());
    store.host = "127.0.0.1";
    store.port = server_.tls_port();
    store.use_tls = true;
    store.tls.ca_file = ca_file;
    store.tls.cert_file = cert;
    store.tls.key_file = key;
    store.timeout_ms = 2000;
    auto context = redis_tls_context(store);
    EXPECT_TRUE(context.ok()) << (context.ok() ? "" : context.error().message);
    return redis_options(store, context.ok() ? context.value() : nullptr);
  }

  proto::testing::TempDir dir_;
  proto::testing::CertFiles server_cert_;
  proto::testing::CertFiles client_cert_;
  RedisServer server_;
  base::MonotonicClock clock_;
  policy::MemoryPoolStore local_{clock_};
};

TEST_F(AsyncRedisTlsTest, ReservesOverTlsWithTheServersCertificateVerified) {
  const policy::PoolSpec spec{"global/tls", 100};
  StoreThread store(tls_options(server_cert_.cert), local_);
  Outcome a = store.reserve(spec, 30, 30);
  EXPECT_EQ(a.source, ReservationSource::kShared);
  EXPECT_EQ(a.take.granted_tokens, 30);
  // The bucket lives in that Redis (read over its plain port): 100 - 30 left.
  auto left = server_.command({"HGET", "cutline:pool:global/tls", "t"});
  ASSERT_TRUE(left && left->type == REDIS_REPLY_STRING);
  EXPECT_NEAR(std::stod(std::string(left->str, left->len)), 70.0, 1.0);
  store.settle_all(10);
  EXPECT_EQ(store.errors(), 0u);
  EXPECT_TRUE(redis_answers(tls_options(server_cert_.cert)));
}

TEST_F(AsyncRedisTlsTest, AnUnverifiableCertificateIsAFailureNotAPlainConnection) {
  // The gateway's own certificate is not the CA of Redis's: the handshake fails, the store
  // serves from this process's pools (fail open), counts the error and says why.
  const policy::PoolSpec spec{"global/tls-bad-ca", 100};
  StoreThread store(tls_options(client_cert_.cert), local_);
  Outcome a = store.reserve(spec, 30, 30);
  EXPECT_EQ(a.source, ReservationSource::kLocal);
  EXPECT_GE(store.errors(), 1u);
  EXPECT_NE(store.last_log().find("certificate verify failed"), std::string::npos)
      << store.last_log();
  EXPECT_NE(store.last_log().find("rediss://127.0.0.1:"), std::string::npos) << store.last_log();
  EXPECT_FALSE(redis_answers(tls_options(client_cert_.cert)));
  // Nothing reached Redis.
  auto left = server_.command({"EXISTS", "cutline:pool:global/tls-bad-ca"});
  ASSERT_TRUE(left);
  EXPECT_EQ(left->integer, 0);
}

TEST_F(AsyncRedisTlsTest, PresentsAClientCertificateWhenRedisAsksForOne) {
  server_.command({"CONFIG", "SET", "tls-auth-clients", "yes"});
  const policy::PoolSpec spec{"global/mtls", 100};
  StoreThread without(tls_options(server_cert_.cert), local_);
  EXPECT_EQ(without.reserve(spec, 5, 5).source, ReservationSource::kLocal);
  EXPECT_GE(without.errors(), 1u);
  StoreThread with(tls_options(server_cert_.cert, client_cert_.cert, client_cert_.key), local_);
  EXPECT_EQ(with.reserve(spec, 5, 5).source, ReservationSource::kShared);
  EXPECT_EQ(with.errors(), 0u);
}

TEST(RedisTlsContext, AnUnreadableCaFileIsAnErrorNamingItAndThePolicyLine) {
  policy::BudgetStore store;
  store.kind = policy::BudgetStoreKind::kRedis;
  store.url = "rediss://redis:6379";
  store.use_tls = true;
  store.tls.ca_file = "/nonexistent/redis-ca.pem";
  store.ref.line = 12;
  auto context = redis_tls_context(store);
  ASSERT_FALSE(context.ok());
  EXPECT_NE(context.error().message.find("/nonexistent/redis-ca.pem"), std::string::npos)
      << context.error().message;
  EXPECT_NE(context.error().message.find("line 12"), std::string::npos) << context.error().message;
  store.use_tls = false;  // redis:// needs no context
  auto plain = redis_tls_context(store);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain.value(), nullptr);
}

}  // namespace
}  // namespace cutline::gateway
