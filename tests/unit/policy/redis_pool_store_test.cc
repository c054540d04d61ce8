// RedisPoolStore against a private redis-server: the token-bucket properties every PoolStore
// must have (run against MemoryPoolStore too, so both stores are held to the same contract),
// replicas sharing one bucket whatever their clocks say, idle buckets expiring, and Redis
// down, hung or flushed -> the call still answers (fail open), counted and logged.
#include "cutline/policy/redis_pool_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../../support/ci.h"
#include "../../support/redis_server.h"
#include "cutline/policy/token_pool.h"

namespace cutline::policy {
namespace {

// redis-server missing: a skip here, a failure in CI (deploy/setup.sh installs it there).
void skip_or_fail(const std::string& why) {
  if (cutline::test::running_in_ci()) FAIL() << "CI=true but Redis is not usable: " << why;
  GTEST_SKIP() << why;
}

using test::RedisServer;

constexpr int64_t kSecondNs = 1000000000;

// One redis-server for the whole binary (started on first use, stopped at exit).
RedisServer* shared_redis() {
  static RedisServer server;
  static const bool started = server.start();
  (void)started;
  return &server;
}

// ---- the contract, for both stores -----------------------------------------------------------

// Each environment makes a store and moves its time forward. The memory store reads the
// injected clock; Redis reads its own TIME, so "time passes" for Redis by moving every bucket's
// last update back (the same thing, seen from the bucket).
struct MemoryEnv {
  static constexpr const char* kName = "memory";
  proto::ManualClock clock;
  std::unique_ptr<MemoryPoolStore> store;

  bool set_up(std::string&) {
    store = std::make_unique<MemoryPoolStore>(clock);
    return true;
  }
  PoolStore& get() { return *store; }
  void advance_ns(int64_t ns) { clock.advance_ns(ns); }
  // Slack for time that passes on its own between calls (none: the clock is frozen).
  int64_t drift_tokens(int64_t) const { return 0; }
};

struct RedisEnv {
  static constexpr const char* kName = "redis";
  proto::ManualClock clock;
  std::unique_ptr<RedisPoolStore> store;
  RedisServer* server = nullptr;
  std::chrono::steady_clock::time_point began;

  bool set_up(std::string& why) {
    server = shared_redis();
    if (server->port() == 0 || !server->command({"PING"})) {
      why = server->error().empty() ? "redis-server is not running" : server->error();
      return false;
    }
    server->command({"FLUSHALL"});
    RedisPoolStoreOptions o;
    o.port = server->port();
    o.command_timeout_ms = 1000;  // a loaded CI machine; the timeout itself is tested below
    store = std::make_unique<RedisPoolStore>(o, clock);
    began = std::chrono::steady_clock::now();
    return true;
  }
  PoolStore& get() { return *store; }
  void advance_ns(int64_t ns) {
    auto keys = server->command({"KEYS", "cutline:pool:*"});
    ASSERT_TRUE(keys);
    for (size_t i = 0; i < keys->elements; ++i) {
      server->command({"HINCRBY", std::string(keys->element[i]->str, keys->element[i]->len), "u",
                       std::to_string(-ns / 1000)});
    }
  }
  // Real time passes while a test talks to Redis: at `tokens_per_minute`, this many tokens at
  // most have refilled since set_up (plus one for rounding).
  int64_t drift_tokens(int64_t tokens_per_minute) const {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    return static_cast<int64_t>(s * static_cast<double>(tokens_per_minute) / 60.0) + 1;
  }
};

template <typename Env>
class PoolStoreContract : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!env_.set_up(why)) skip_or_fail(why);
  }
  PoolStore& store() { return env_.get(); }
  Env env_;
};

struct EnvNames {
  template <typename T>
  static std::string GetName(int) {
    return T::kName;
  }
};
using Envs = ::testing::Types<MemoryEnv, RedisEnv>;
TYPED_TEST_SUITE(PoolStoreContract, Envs, EnvNames);

// Rates are low (60 tokens per minute = one per second) so that the real time Redis round trips
// take, even on a loaded machine, cannot refill a whole token between two calls.

TYPED_TEST(PoolStoreContract, StartsFullAndRefillsContinuously) {
  PoolStore& s = this->store();
  PoolSpec spec{"tenant/p/alice", 60};
  EXPECT_EQ(s.available(spec), 60);
  EXPECT_EQ(s.take(spec, 60, 60).granted_tokens, 60);
  EXPECT_EQ(s.available(spec), 0);
  this->env_.advance_ns(5 * kSecondNs + kSecondNs / 2);
  EXPECT_EQ(s.available(spec), 5);
  this->env_.advance_ns(kSecondNs * 30);
  EXPECT_EQ(s.available(spec), 35);
  this->env_.advance_ns(kSecondNs * 3600);  // capped at one minute's worth
  EXPECT_EQ(s.available(spec), 60);
}

TYPED_TEST(PoolStoreContract, AllOrNothingSaysWhenToRetry) {
  PoolStore& s = this->store();
  PoolSpec spec{"k", 60};
  ASSERT_EQ(s.take(spec, 50, 50).granted_tokens, 50);
  PoolTake t = s.take(spec, 30, 30);  // 10 left, 20 missing
  EXPECT_EQ(t.granted_tokens, 0);
  EXPECT_EQ(t.available_tokens, 10);
  EXPECT_NEAR(t.retry_after_ms, 20000, 500);
  EXPECT_EQ(s.available(spec), 10);  // a refusal takes nothing
  this->env_.advance_ns(20 * kSecondNs);
  EXPECT_EQ(s.take(spec, 30, 30).granted_tokens, 30);
}

TYPED_TEST(PoolStoreContract, ClampTakesWhatRemainsAboveTheMinimum) {
  PoolStore& s = this->store();
  PoolSpec spec{"k", 60};
  ASSERT_EQ(s.take(spec, 57, 57).granted_tokens, 57);
  PoolTake t = s.take(spec, 5, 2);
  EXPECT_EQ(t.granted_tokens, 3);
  EXPECT_EQ(t.available_tokens, 3);
  t = s.take(spec, 5, 2);
  EXPECT_EQ(t.granted_tokens, 0);
  EXPECT_NEAR(t.retry_after_ms, 2000, 500);  // 2 tokens at 1 per second
}

TYPED_TEST(PoolStoreContract, ReservationRefundsTheUnusedPartAtSettle) {
  PoolStore& s = this->store();
  PoolSpec spec{"k", 60};
  {
    Reservation r(&s, spec, s.take(spec, 40, 40).granted_tokens);
    EXPECT_EQ(s.available(spec), 20);
    r.settle(15);
    EXPECT_EQ(s.available(spec), 45);
  }
  EXPECT_EQ(s.available(spec), 45);  // settled: the destructor gives nothing more
  {
    Reservation r(&s, spec, s.take(spec, 30, 30).granted_tokens);
    EXPECT_EQ(s.available(spec), 15);
  }  // never settled (cancelled): everything comes back
  EXPECT_EQ(s.available(spec), 45);
}

TYPED_TEST(PoolStoreContract, RefundsNeverFillBeyondCapacity) {
  PoolStore& s = this->store();
  PoolSpec spec{"k", 60};
  ASSERT_EQ(s.take(spec, 10, 10).granted_tokens, 10);
  s.refund(spec, 5000);
  EXPECT_EQ(s.available(spec), 60);
  EXPECT_EQ(s.take(spec, 61, 61).granted_tokens, 0);
}

TYPED_TEST(PoolStoreContract, UseBeyondTheReservationIsChargedAsDebt) {
  PoolStore& s = this->store();
  PoolSpec spec{"k", 60};
  Reservation r(&s, spec, s.take(spec, 60, 60).granted_tokens);
  r.settle(63);
  EXPECT_EQ(s.available(spec), -3);
  PoolTake t = s.take(spec, 1, 1);
  EXPECT_EQ(t.granted_tokens, 0);
  EXPECT_EQ(t.available_tokens, -3);
  EXPECT_NEAR(t.retry_after_ms, 4000, 500);  // 4 tokens at 1 per second
  this->env_.advance_ns(4 * kSecondNs);
  EXPECT_EQ(s.take(spec, 1, 1).granted_tokens, 1);
}

TYPED_TEST(PoolStoreContract, ARateChangeAppliesFromTheNextCall) {
  PoolStore& s = this->store();
  ASSERT_EQ(s.take({"k", 120}, 20, 20).granted_tokens, 20);  // 100 left
  // A reload lowered the rate: the level is clamped to the new capacity.
  EXPECT_EQ(s.available({"k", 60}), 60);
  this->env_.advance_ns(kSecondNs);
  EXPECT_EQ(s.take({"k", 60}, 60, 60).granted_tokens, 60);
  this->env_.advance_ns(5 * kSecondNs);  // 1 per second now
  EXPECT_EQ(s.available({"k", 60}), 5);
}

TYPED_TEST(PoolStoreContract, ConcurrentTakesNeverOverdraw) {
  PoolStore& s = this->store();
  PoolSpec spec{"shared", 600};
  std::atomic<int64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) granted += s.take(spec, 3, 3).granted_tokens;
    });
  }
  for (auto& th : threads) th.join();
  // 1200 tokens wanted from 600 (plus what refilled meanwhile): never more than was there.
  const int64_t drift = this->env_.drift_tokens(600);
  EXPECT_GE(granted.load(), 597);
  EXPECT_LE(granted.load(), 600 + drift);
  EXPECT_GE(s.available(spec), 0);
  EXPECT_LE(s.available(spec), 2 + drift);
}

// ---- Redis only -------------------------------------------------------------------------------

class RedisPoolStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = shared_redis();
    if (server_->port() == 0 || !server_->command({"PING"})) skip_or_fail(server_->error());
    server_->command({"FLUSHALL"});
  }
  RedisPoolStoreOptions options(uint16_t port = 0) const {
    RedisPoolStoreOptions o;
    o.port = port != 0 ? port : server_->port();
    o.command_timeout_ms = 1000;
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_.push_back(line);
    };
    return o;
  }
  std::vector<std::string> log() const {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }
  int64_t pttl(const std::string& key) const {
    auto r = server_->command({"PTTL", key});
    return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -100;
  }

  RedisServer* server_ = nullptr;
  mutable std::mutex log_mu_;
  mutable std::vector<std::string> log_;
};

TEST_F(RedisPoolStoreTest, TwoReplicasShareOneBucketWhateverTheirClocksSay) {
  proto::ManualClock clock_a(0);
  proto::ManualClock clock_b(3600 * kSecondNs);  // an hour ahead: Redis's TIME decides
  RedisPoolStore a(options(), clock_a);
  RedisPoolStore b(options(), clock_b);
  PoolSpec spec{"tenant/p/acme", 600};
  EXPECT_EQ(a.take(spec, 400, 400).granted_tokens, 400);
  EXPECT_EQ(b.available(spec), 200);
  PoolTake t = b.take(spec, 300, 50);  // clamped to what replica a left
  EXPECT_EQ(t.granted_tokens, 200);
  t = a.take(spec, 100, 100);
  EXPECT_EQ(t.granted_tokens, 0);
  EXPECT_NEAR(t.retry_after_ms, 10000, 200);
  b.refund(spec, 150);  // b's request ended early: a sees it
  EXPECT_EQ(a.take(spec, 100, 100).granted_tokens, 100);
  EXPECT_EQ(a.errors_total() + b.errors_total(), 0u);
}

TEST_F(RedisPoolStoreTest, BucketsExpireOnceRefilledAndFullOnesAreDeleted) {
  proto::ManualClock clock;
  RedisPoolStore store(options(), clock);
  PoolSpec spec{"k", 600};  // 10 tokens per second
  ASSERT_EQ(store.take(spec, 50, 50).granted_tokens, 50);
  // 50 tokens missing = 5 s to refill, plus a second.
  const int64_t ttl = pttl("cutline:pool:k");
  EXPECT_GT(ttl, 5000);
  EXPECT_LE(ttl, 6000);
  store.refund(spec, 50);                 // full again: indistinguishable from a new bucket
  EXPECT_EQ(pttl("cutline:pool:k"), -2);  // no such key
  EXPECT_EQ(store.available(spec), 600);
  EXPECT_EQ(pttl("cutline:pool:k"), -2);  // available() writes nothing
}

TEST_F(RedisPoolStoreTest, ScriptsAreReloadedAfterAFlush) {
  proto::ManualClock clock;
  RedisPoolStore store(options(), clock);
  PoolSpec spec{"k", 600};
  ASSERT_EQ(store.take(spec, 100, 100).granted_tokens, 100);
  server_->command({"SCRIPT", "FLUSH"});  // as after a Redis restart
  EXPECT_EQ(store.take(spec, 100, 100).granted_tokens, 100);
  EXPECT_EQ(store.available(spec), 400);
  EXPECT_EQ(store.errors_total(), 0u);
}

TEST_F(RedisPoolStoreTest, UsesTheConfiguredDatabase) {
  proto::ManualClock clock;
  RedisPoolStoreOptions o = options();
  o.db = 3;
  RedisPoolStore store(o, clock);
  ASSERT_EQ(store.take({"k", 600}, 100, 100).granted_tokens, 100);
  auto in_db0 = server_->command({"EXISTS", "cutline:pool:k"});
  ASSERT_TRUE(in_db0);
  EXPECT_EQ(in_db0->integer, 0);
  RedisPoolStore db0(options(), clock);
  EXPECT_EQ(db0.available({"k", 600}), 600);
  RedisPoolStore db3(o, clock);
  EXPECT_EQ(db3.available({"k", 600}), 500);
}

TEST_F(RedisPoolStoreTest, ConnectionsAreReusedAcrossCalls) {
  proto::ManualClock clock;
  RedisPoolStore store(options(), clock);
  for (int i = 0; i < 20; ++i) store.take({"k", 6000}, 1, 1);
  EXPECT_EQ(store.idle_connections(), 1u);
  auto clients = server_->command({"CLIENT", "LIST"});
  ASSERT_TRUE(clients);
  // The store's one connection plus the one asking.
  const std::string list(clients->str, clients->len);
  EXPECT_EQ(std::count(list.begin(), list.end(), '\n'), 2) << list;
}

TEST_F(RedisPoolStoreTest, RedisDownFailsOpenToLocalBucketsAndSaysSo) {
  RedisServer own;
  if (!own.start()) return skip_or_fail(own.error());
  proto::ManualClock clock;
  RedisPoolStore store(options(own.port()), clock);
  PoolSpec spec{"k", 600};
  ASSERT_TRUE(store.ping());
  ASSERT_EQ(store.take(spec, 500, 500).granted_tokens, 500);
  own.stop();
  // Unreachable: answered from this process's own (full) bucket, counted, logged once.
  PoolTake t = store.take(spec, 500, 500);
  EXPECT_EQ(t.granted_tokens, 500);
  EXPECT_EQ(store.errors_total(), 1u);
  EXPECT_EQ(store.available(spec), 100);  // the local bucket
  store.refund(spec, 500);
  EXPECT_EQ(store.errors_total(), 3u);
  auto lines = log();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("fail open"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("127.0.0.1:" + std::to_string(own.port())), std::string::npos);
  EXPECT_FALSE(store.ping());
  // Redis is back on the same port: after the back-off the shared bucket is used again.
  if (!own.start(own.port())) GTEST_SKIP() << "could not restart on the same port";
  clock.advance_ms(1001);
  EXPECT_EQ(store.available(spec), 600);  // a fresh Redis (no persistence): full
  EXPECT_EQ(store.take(spec, 600, 600).granted_tokens, 600);
  EXPECT_EQ(store.errors_total(), 3u);
  // Later failures log again, at most once per interval.
  own.stop();
  clock.advance_ms(10001);
  store.take(spec, 1, 1);
  store.take(spec, 1, 1);
  EXPECT_EQ(log().size(), 2u);
}

TEST_F(RedisPoolStoreTest, ABackOffAvoidsAConnectionAttemptPerCall) {
  proto::ManualClock clock;
  const uint16_t nobody = test::free_port();
  RedisPoolStore store(options(nobody), clock);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(store.take({"k", 600}, 1, 1).granted_tokens, 1);
  EXPECT_EQ(store.errors_total(), 100u);
  EXPECT_EQ(store.available({"k", 600}), 500);  // all served from the local bucket
  EXPECT_EQ(log().size(), 1u);
}

// A Redis that accepts connections but never answers (hung, or a black-holed route) must not
// hold the caller (an event loop) for longer than the command timeout.
TEST_F(RedisPoolStoreTest, AHungRedisCostsOneTimeoutThenTheLocalBucket) {
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(silent, 16), 0);  // the kernel completes connections; nobody reads
  socklen_t len = sizeof a;
  getsockname(silent, reinterpret_cast<sockaddr*>(&a), &len);
  proto::ManualClock clock;
  RedisPoolStoreOptions o = options(ntohs(a.sin_port));
  o.command_timeout_ms = 50;
  RedisPoolStore store(o, clock);
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_EQ(store.take({"k", 600}, 10, 10).granted_tokens, 10);
  EXPECT_EQ(store.take({"k", 600}, 10, 10).granted_tokens, 10);  // marked down: no wait
  const auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_LT(took, std::chrono::milliseconds(500));
  EXPECT_GE(took, std::chrono::milliseconds(45));
  EXPECT_EQ(store.errors_total(), 2u);
  ::close(silent);
}

}  // namespace
}  // namespace cutline::policy
