// AsyncRedisPoolStore against a private redis-server: reservations atomic across two stores,
// refunded by expiry when never settled, AUTH with an ACL user, EVALSHA's fallback to EVAL,
// fail open / fail closed, and — the point of it — an event loop that keeps running while Redis
// is slow (a script keeps Redis busy, as DEBUG SLEEP would). Without redis-server the tests are
// skipped, except under CI=true where they fail.
#include "cutline/gateway/async_redis_pool_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../../support/redis_server.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/timer.h"

namespace cutline::gateway {
namespace {

using test::RedisServer;

// Keeps Redis busy for `ms` (a Lua script runs atomically: every other client waits). The
// latency DEBUG SLEEP would inject, without needing enable-debug-command (off in Redis 7).
void stall_redis(RedisServer* server, int ms) {
  server->command({"EVAL",
                   "local t = redis.call('TIME'); local s = t[1] * 1000000 + t[2]\n"
                   "while true do\n"
                   "  local n = redis.call('TIME')\n"
                   "  if n[1] * 1000000 + n[2] - s > tonumber(ARGV[1]) * 1000 then break end\n"
                   "end\n"
                   "return 1",
                   "0", std::to_string(ms)});
}

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
      (void)line;
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

 private:
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
  for (int i = 0; i < 100 && server_->command({"ZCARD", "cutline:pool:global/all:r"})->integer;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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
  std::thread sleeper([&] { stall_redis(server_, 1200); });
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
  bool shared = false;
  for (int i = 0; i < 40 && !shared; ++i) {
    shared = s.reserve(spec, 1, 1).source == ReservationSource::kShared;
    if (!shared) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(shared);
  s.settle_all(0);
  // Long enough that the stall has surely begun 200 ms later, even on a loaded machine.
  std::thread sleeper([&] { stall_redis(server_, 1500); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Outcome late = s.reserve(spec, 100, 100);
  EXPECT_EQ(late.source, ReservationSource::kLocal);  // fail open: this process's bucket
  EXPECT_EQ(late.take.granted_tokens, 100);
  EXPECT_LT(late.elapsed_ms, 800);  // the 100 ms timeout, not the rest of Redis's stall
  sleeper.join();
  EXPECT_GE(s.errors(), 1u);
  // Redis ran the reserve after its sleep; the store gave the 100 tokens straight back.
  for (int i = 0; i < 100 && server_->command({"ZCARD", "cutline:pool:global/late:r"})->integer;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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

}  // namespace
}  // namespace cutline::gateway
