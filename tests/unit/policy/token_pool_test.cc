// Token buckets on an injected clock, and the RAII reservation that cannot leak.
#include "cutline/policy/token_pool.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace cutline::policy {
namespace {

constexpr int64_t kSecondNs = 1000000000;

TEST(TokenPool, StartsFullAndRefillsContinuously) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  PoolSpec spec{"tenant/p/alice", 600};  // 10 tokens per second
  EXPECT_EQ(store.available(spec), 600);
  PoolTake t = store.take(spec, 600, 600);
  EXPECT_EQ(t.granted_tokens, 600);
  EXPECT_EQ(store.available(spec), 0);
  clock.advance_ns(kSecondNs / 2);
  EXPECT_EQ(store.available(spec), 5);
  clock.advance_ns(kSecondNs * 30);
  EXPECT_EQ(store.available(spec), 305);
  clock.advance_ns(kSecondNs * 3600);  // capped at one minute's worth
  EXPECT_EQ(store.available(spec), 600);
}

TEST(TokenPool, AllOrNothingSaysWhenToRetry) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  PoolSpec spec{"k", 60};  // 1 token per second
  ASSERT_EQ(store.take(spec, 50, 50).granted_tokens, 50);
  PoolTake t = store.take(spec, 30, 30);  // 10 left, 20 missing
  EXPECT_EQ(t.granted_tokens, 0);
  EXPECT_EQ(t.available_tokens, 10);
  EXPECT_EQ(t.retry_after_ms, 20000);
  EXPECT_EQ(store.available(spec), 10);  // a refusal takes nothing
  clock.advance_ns(20 * kSecondNs);
  EXPECT_EQ(store.take(spec, 30, 30).granted_tokens, 30);
}

TEST(TokenPool, ClampTakesWhatRemainsAboveTheMinimum) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  PoolSpec spec{"k", 100};
  ASSERT_EQ(store.take(spec, 70, 70).granted_tokens, 70);
  PoolTake t = store.take(spec, 50, 10);
  EXPECT_EQ(t.granted_tokens, 30);
  t = store.take(spec, 50, 10);
  EXPECT_EQ(t.granted_tokens, 0);
  EXPECT_GT(t.retry_after_ms, 0);
}

TEST(TokenPool, ReservationRefundsTheUnusedPartAtSettle) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  PoolSpec spec{"k", 1000};
  {
    Reservation r(&store, spec, store.take(spec, 400, 400).granted_tokens);
    EXPECT_EQ(store.available(spec), 600);
    r.settle(150);  // the stream was cut after 150 tokens
    EXPECT_EQ(store.available(spec), 850);
    r.settle(0);  // idempotent
    EXPECT_EQ(store.available(spec), 850);
  }
  EXPECT_EQ(store.available(spec), 850);  // settled: the destructor gives nothing more
}

TEST(TokenPool, AnUnsettledReservationRefundsEverything) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  PoolSpec spec{"k", 1000};
  {
    Reservation r(&store, spec, store.take(spec, 400, 400).granted_tokens);
    Reservation moved = std::move(r);  // ownership moves; still exactly one refund
    EXPECT_FALSE(r.active());
    EXPECT_EQ(store.available(spec), 600);
  }  // cancelled before any output: nothing settled
  EXPECT_EQ(store.available(spec), 1000);
}

TEST(TokenPool, MoveAssignmentRefundsTheOverwrittenReservation) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  PoolSpec spec{"k", 1000};
  Reservation a(&store, spec, store.take(spec, 100, 100).granted_tokens);
  Reservation b(&store, spec, store.take(spec, 200, 200).granted_tokens);
  EXPECT_EQ(store.available(spec), 700);
  a = std::move(b);
  EXPECT_EQ(store.available(spec), 800);
  a.settle(200);
  EXPECT_EQ(store.available(spec), 800);
}

TEST(TokenPool, UseBeyondTheReservationIsChargedAsDebt) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  PoolSpec spec{"k", 100};
  Reservation r(&store, spec, store.take(spec, 100, 100).granted_tokens);
  r.settle(130);
  EXPECT_EQ(store.available(spec), -30);
  EXPECT_EQ(store.take(spec, 10, 10).granted_tokens, 0);
}

// A count that wrapped (negative or zero) is refused; it never adds tokens to the bucket.
TEST(TokenPool, TakesOfNoOrNegativeTokensAreRefused) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  PoolSpec spec{"k", 1000};
  ASSERT_EQ(store.take(spec, 400, 400).granted_tokens, 400);
  for (int64_t n : {int64_t{0}, int64_t{-1}, INT64_MIN}) {
    PoolTake t = store.take(spec, n, n);
    EXPECT_EQ(t.granted_tokens, 0) << n;
    EXPECT_GE(t.retry_after_ms, 1) << n;
    EXPECT_EQ(store.available(spec), 600) << n;
  }
  // A minimum outside [1, want] is brought into it.
  EXPECT_EQ(store.take(spec, 10, INT64_MIN).granted_tokens, 10);
  EXPECT_EQ(store.take(spec, 700, INT64_MAX).granted_tokens, 0);
  EXPECT_EQ(store.available(spec), 590);
}

// More than the capacity can never pass: the refusal says to retry within two minutes (from the
// deepest debt to full), not a number of years computed from the request.
TEST(TokenPool, RetryAfterOfAnImpossibleTakeIsBounded) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  PoolSpec spec{"k", 60};
  PoolTake t = store.take(spec, INT64_MAX, INT64_MAX);
  EXPECT_EQ(t.granted_tokens, 0);
  EXPECT_GE(t.retry_after_ms, 1);
  EXPECT_LE(t.retry_after_ms, 120000);
  EXPECT_EQ(store.available(spec), 60);
}

// Debt stops at one minute of the rate: an absurd usage count cannot lock the pool for long.
TEST(TokenPool, DebtIsBoundedByOneMinuteOfTheRate) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  PoolSpec spec{"k", 100};
  Reservation r(&store, spec, store.take(spec, 100, 100).granted_tokens);
  r.settle(INT64_MAX);
  EXPECT_EQ(store.available(spec), -100);
  EXPECT_EQ(store.held_tokens(), 0);
  clock.advance_ms(120000);  // two minutes refill it
  EXPECT_EQ(store.available(spec), 100);
}

TEST(TokenPool, ShrinkGivesBackTheDifference) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  PoolSpec spec{"k", 1000};
  Reservation r(&store, spec, store.take(spec, 500, 500).granted_tokens);
  r.shrink_to(200);
  EXPECT_EQ(r.tokens(), 200);
  EXPECT_EQ(store.available(spec), 800);
  r.settle(50);
  EXPECT_EQ(store.available(spec), 950);
}

TEST(TokenPool, FullBucketsArePruned) {
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  store.take({"a", 60}, 60, 60);
  store.take({"b", 60}, 1, 1);
  EXPECT_EQ(store.bucket_count(), 2u);
  clock.advance_ns(2 * kSecondNs);  // b is full again, a is not
  store.prune();
  EXPECT_EQ(store.bucket_count(), 1u);
  EXPECT_EQ(store.available({"a", 60}), 2);
}

TEST(TokenPool, ConcurrentTakesNeverOverdraw) {
  base::ManualClock clock;  // frozen: no refill during the race
  MemoryPoolStore store(clock);
  PoolSpec spec{"shared", 10000};
  std::atomic<int64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) granted += store.take(spec, 3, 3).granted_tokens;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(granted.load(), 9999);  // 3333 takes of 3; the last token stays
  EXPECT_EQ(store.available(spec), 1);
}

}  // namespace
}  // namespace cutline::policy
