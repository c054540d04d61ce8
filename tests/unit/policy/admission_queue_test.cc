// AdmissionQueue: slots, priority classes, fair share across tenants, timeouts.
#include "cutline/policy/admission_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace cutline::policy {
namespace {

constexpr int64_t kMsNs = 1000000;

TEST(AdmissionQueue, AdmitsUpToTheLimitThenQueuesThenRejects) {
  base::ManualClock clock;
  AdmissionQueue q({2, 1}, clock);
  EXPECT_EQ(q.arrive(1, "a", Priority::kInteractive, 1000), Arrival::kAdmitted);
  EXPECT_EQ(q.arrive(2, "a", Priority::kInteractive, 1000), Arrival::kAdmitted);
  EXPECT_EQ(q.arrive(3, "a", Priority::kInteractive, 1000), Arrival::kQueued);
  EXPECT_EQ(q.arrive(4, "a", Priority::kInteractive, 1000), Arrival::kRejectedQueueFull);
  EXPECT_EQ(q.live().queue_depth, 1);
  EXPECT_EQ(q.live().in_flight, 2);
  auto next = q.release();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->waiter_id, 3u);
  EXPECT_EQ(q.in_flight(), 2);
  EXPECT_FALSE(q.release());
  EXPECT_EQ(q.in_flight(), 1);
}

TEST(AdmissionQueue, UnlimitedAlwaysAdmits) {
  base::ManualClock clock;
  AdmissionQueue q({std::nullopt, 0}, clock);
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(q.arrive(i, "a", Priority::kBatch, 1), Arrival::kAdmitted);
  }
  EXPECT_EQ(q.in_flight(), 100);
}

TEST(AdmissionQueue, NoQueueMeansRejectAtOnce) {
  base::ManualClock clock;
  AdmissionQueue q({1, 0}, clock);
  EXPECT_EQ(q.arrive(1, "a", Priority::kInteractive, 1000), Arrival::kAdmitted);
  EXPECT_EQ(q.arrive(2, "a", Priority::kInteractive, 1000), Arrival::kRejectedQueueFull);
}

TEST(AdmissionQueue, InteractiveBeforeBatch) {
  base::ManualClock clock;
  AdmissionQueue q({1, 10}, clock);
  ASSERT_EQ(q.arrive(1, "a", Priority::kInteractive, 10000), Arrival::kAdmitted);
  ASSERT_EQ(q.arrive(2, "a", Priority::kBatch, 10000), Arrival::kQueued);
  ASSERT_EQ(q.arrive(3, "b", Priority::kBatch, 10000), Arrival::kQueued);
  ASSERT_EQ(q.arrive(4, "c", Priority::kInteractive, 10000), Arrival::kQueued);
  EXPECT_EQ(q.release()->waiter_id, 4u);  // arrived last, served first
  EXPECT_EQ(q.release()->waiter_id, 2u);
  EXPECT_EQ(q.release()->waiter_id, 3u);
}

TEST(AdmissionQueue, RoundRobinAcrossTenantsFifoWithin) {
  base::ManualClock clock;
  AdmissionQueue q({1, 100}, clock);
  ASSERT_EQ(q.arrive(0, "flood", Priority::kInteractive, 10000), Arrival::kAdmitted);
  for (uint64_t i = 1; i <= 5; ++i) q.arrive(i, "flood", Priority::kInteractive, 10000);
  q.arrive(100, "quiet", Priority::kInteractive, 10000);
  q.arrive(101, "quiet", Priority::kInteractive, 10000);
  std::vector<uint64_t> order;
  while (auto n = q.release()) order.push_back(n->waiter_id);
  EXPECT_EQ(order, (std::vector<uint64_t>{1, 100, 2, 101, 3, 4, 5}));
}

// Two tenants share 4 slots; one floods the queue with 20 new requests every 100 ms, the other
// sends one request every 100 ms. Each request runs 100 ms. With FIFO the quiet tenant would
// wait behind the whole flood (seconds); with round-robin its wait stays within one service
// time.
TEST(AdmissionQueue, AFloodingTenantCannotStarveAnother) {
  base::ManualClock clock;
  AdmissionQueue q({4, 1000}, clock);
  std::multimap<int64_t, uint64_t> running;  // finish time -> id
  std::map<uint64_t, int64_t> quiet_arrival;
  int64_t max_quiet_wait_ns = 0;
  int quiet_served = 0;
  uint64_t next_id = 1;
  auto start = [&](uint64_t id) { running.emplace(clock.now_ns() + 100 * kMsNs, id); };
  auto is_quiet = [](uint64_t id) { return id % 2 == 0; };
  auto arrive = [&](uint64_t id, const char* tenant) {
    if (q.arrive(id, tenant, Priority::kInteractive, 60000) == Arrival::kAdmitted) {
      start(id);
      if (is_quiet(id)) ++quiet_served;
    }
  };
  for (int tick = 0; tick < 50; ++tick) {
    // Finish everything due by now; each release hands its slot to the next waiter.
    while (!running.empty() && running.begin()->first <= clock.now_ns()) {
      running.erase(running.begin());
      if (auto n = q.release()) {
        start(n->waiter_id);
        if (is_quiet(n->waiter_id)) {
          ++quiet_served;
          max_quiet_wait_ns =
              std::max(max_quiet_wait_ns, clock.now_ns() - quiet_arrival.at(n->waiter_id));
        }
      }
    }
    for (int i = 0; i < 20; ++i) {
      uint64_t id = next_id % 2 == 1 ? next_id : next_id + 1;  // odd ids: flood
      next_id = id + 1;
      arrive(id, "flood");
    }
    uint64_t quiet_id = next_id % 2 == 0 ? next_id : next_id + 1;
    next_id = quiet_id + 1;
    quiet_arrival[quiet_id] = clock.now_ns();
    arrive(quiet_id, "quiet");
    clock.advance_ms(100);
  }
  EXPECT_GE(quiet_served, 45);  // nearly every quiet request got through
  EXPECT_LE(max_quiet_wait_ns, 200 * kMsNs);
  EXPECT_GT(q.depth(), 500);  // while the flood itself piles up
}

TEST(AdmissionQueue, ExpireReturnsWaitersWhoseTimeoutPassed) {
  base::ManualClock clock;
  AdmissionQueue q({1, 10}, clock);
  q.arrive(1, "a", Priority::kInteractive, 1000);
  q.arrive(2, "a", Priority::kInteractive, 2000);
  clock.advance_ms(500);
  q.arrive(3, "b", Priority::kBatch, 1000);
  EXPECT_EQ(q.next_expiry_ns(), 1500 * kMsNs);
  clock.advance_ms(999);
  EXPECT_TRUE(q.expire().empty());
  clock.advance_ms(1);  // 1500 ms: waiter 3's timeout
  auto expired = q.expire();
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].waiter_id, 3u);
  clock.advance_ms(500);
  expired = q.expire();
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].waiter_id, 2u);
  EXPECT_EQ(q.depth(), 0);
  EXPECT_FALSE(q.next_expiry_ns());
}

TEST(AdmissionQueue, CancelRemovesAWaiter) {
  base::ManualClock clock;
  AdmissionQueue q({1, 10}, clock);
  q.arrive(1, "a", Priority::kInteractive, 1000);
  q.arrive(2, "a", Priority::kInteractive, 1000);
  q.arrive(3, "b", Priority::kInteractive, 1000);
  EXPECT_TRUE(q.cancel(2));
  EXPECT_FALSE(q.cancel(2));
  EXPECT_EQ(q.depth(), 1);
  EXPECT_EQ(q.release()->waiter_id, 3u);
  EXPECT_FALSE(q.release());
}

TEST(AdmissionQueue, RaisedLimitAdmitsWaitersLoweredLimitDrains) {
  base::ManualClock clock;
  AdmissionQueue q({1, 10}, clock);
  q.arrive(1, "a", Priority::kInteractive, 1000);
  q.arrive(2, "a", Priority::kInteractive, 1000);
  q.arrive(3, "a", Priority::kInteractive, 1000);
  auto admitted = q.set_limits({3, 10});
  ASSERT_EQ(admitted.size(), 2u);
  EXPECT_EQ(admitted[0].waiter_id, 2u);
  EXPECT_EQ(q.in_flight(), 3);
  EXPECT_TRUE(q.set_limits({1, 10}).empty());
  q.arrive(4, "a", Priority::kInteractive, 1000);
  EXPECT_FALSE(q.release());  // 2 running, limit 1: no slot yet
  EXPECT_FALSE(q.release());  // 1 running
  EXPECT_EQ(q.release()->waiter_id, 4u);
}

// Worker threads arrive and release concurrently: the slot limit is never exceeded and every
// queued waiter is eventually admitted exactly once.
TEST(AdmissionQueue, ConcurrentUseKeepsTheLimit) {
  base::ManualClock clock;
  AdmissionQueue q({3, 10000}, clock);
  std::atomic<int> running{0}, max_running{0}, admitted{0};
  std::mutex mu;
  std::vector<uint64_t> handed_over;  // waiters admitted by someone else's release
  auto run_one = [&] {
    int now = ++running;
    int prev = max_running.load();
    while (now > prev && !max_running.compare_exchange_weak(prev, now)) {
    }
    ++admitted;
    --running;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 500; ++i) {
        const uint64_t id = t * 1000 + i;
        if (q.arrive(id, t % 2 ? "a" : "b", Priority::kInteractive, 60000) == Arrival::kAdmitted) {
          run_one();
          if (auto next = q.release()) {
            std::lock_guard<std::mutex> lock(mu);
            handed_over.push_back(next->waiter_id);
          }
        }
        // Finish some of the handed-over waiters from this thread.
        std::vector<uint64_t> mine;
        {
          std::lock_guard<std::mutex> lock(mu);
          mine.swap(handed_over);
        }
        for (size_t k = 0; k < mine.size(); ++k) {
          run_one();
          if (auto next = q.release()) {
            std::lock_guard<std::mutex> lock(mu);
            handed_over.push_back(next->waiter_id);
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  while (!handed_over.empty()) {
    handed_over.pop_back();
    run_one();
    if (auto next = q.release()) handed_over.push_back(next->waiter_id);
  }
  EXPECT_EQ(admitted.load(), 2000);
  EXPECT_EQ(q.depth(), 0);
  EXPECT_EQ(q.in_flight(), 0);
  EXPECT_LE(max_running.load(), 3);
}

// Observe mode: requests take no slot and never wait, but each learns the arrival it would have
// had, counting the enforced and the observed requests of the group together.
TEST(AdmissionQueue, ObservedArrivalsSayWhatEnforcingWouldHaveDone) {
  base::ManualClock clock;
  AdmissionQueue q({2, 1}, clock);
  EXPECT_EQ(q.arrive(1, "a", Priority::kInteractive, 1000), Arrival::kAdmitted);
  auto a = q.observe_arrive();  // one enforced running: a slot is free
  EXPECT_EQ(a.would, Arrival::kAdmitted);
  EXPECT_EQ(a.in_flight, 1);
  a = q.observe_arrive();  // two running: it would wait (queue_depth 1)
  EXPECT_EQ(a.would, Arrival::kQueued);
  EXPECT_EQ(a.in_flight, 2);
  EXPECT_EQ(a.waiting, 0);
  a = q.observe_arrive();  // one would be waiting already: the queue is full
  EXPECT_EQ(a.would, Arrival::kRejectedQueueFull);
  EXPECT_EQ(a.in_flight, 3);
  EXPECT_EQ(a.waiting, 1);
  // Observed requests hold no slot: an enforced request is still admitted.
  EXPECT_EQ(q.in_flight(), 1);
  EXPECT_EQ(q.arrive(2, "a", Priority::kInteractive, 1000), Arrival::kAdmitted);
  q.observe_release();
  q.observe_release();
  q.observe_release();
  EXPECT_EQ(q.observe_arrive().would, Arrival::kQueued);  // two enforced running, none observed
}

// One slot, four places: alice's burst takes the slot and every place. Bob is not refused: he
// displaces alice's newest waiter, and the places converge to two each; then both are refused.
TEST(AdmissionQueue, AFullQueueGivesAnotherTenantItsShareByDisplacingTheNewest) {
  base::ManualClock clock;
  AdmissionQueue q({1, 4}, clock);
  EXPECT_EQ(q.arrive(1, "alice", Priority::kInteractive, 1000), Arrival::kAdmitted);
  for (uint64_t id = 2; id <= 5; ++id) {
    EXPECT_EQ(q.arrive(id, "alice", Priority::kInteractive, 1000), Arrival::kQueued);
  }
  ArrivalResult sixth = q.arrive(6, "alice", Priority::kInteractive, 1000);
  EXPECT_EQ(sixth.arrival, Arrival::kRejectedQueueFull);
  EXPECT_FALSE(sixth.displaced);

  ArrivalResult bob = q.arrive(10, "bob", Priority::kInteractive, 1000);
  EXPECT_EQ(bob.arrival, Arrival::kQueued);
  ASSERT_TRUE(bob.displaced);
  EXPECT_EQ(bob.displaced->waiter_id, 5u);  // alice's newest
  ArrivalResult bob2 = q.arrive(11, "bob", Priority::kInteractive, 1000);
  EXPECT_EQ(bob2.arrival, Arrival::kQueued);
  ASSERT_TRUE(bob2.displaced);
  EXPECT_EQ(bob2.displaced->waiter_id, 4u);
  EXPECT_EQ(q.depth(), 4);
  // Two each: an equal split is kept, whoever arrives.
  ArrivalResult bob3 = q.arrive(12, "bob", Priority::kInteractive, 1000);
  EXPECT_EQ(bob3.arrival, Arrival::kRejectedQueueFull);
  EXPECT_FALSE(bob3.displaced);
  EXPECT_EQ(q.arrive(13, "alice", Priority::kInteractive, 1000), Arrival::kRejectedQueueFull);
  // A displaced waiter is gone: it neither expires nor can be cancelled.
  EXPECT_FALSE(q.cancel(5));
  EXPECT_FALSE(q.cancel(4));

  // The slot goes round-robin: alice (2), bob (10), alice (3), bob (11).
  std::vector<uint64_t> order;
  while (auto next = q.release()) order.push_back(next->waiter_id);
  EXPECT_EQ(order, (std::vector<uint64_t>{2, 10, 3, 11}));
  EXPECT_EQ(q.depth(), 0);
}

// A third tenant gets a place too, from whoever holds the most; a tenant holding as many as the
// largest holder less one is refused (no place moves back and forth).
TEST(AdmissionQueue, DisplacementTakesFromTheLargestHolderOnly) {
  base::ManualClock clock;
  AdmissionQueue q({1, 4}, clock);
  EXPECT_EQ(q.arrive(1, "a", Priority::kInteractive, 1000), Arrival::kAdmitted);
  EXPECT_EQ(q.arrive(2, "a", Priority::kBatch, 1000), Arrival::kQueued);
  EXPECT_EQ(q.arrive(3, "a", Priority::kInteractive, 1000), Arrival::kQueued);
  EXPECT_EQ(q.arrive(4, "b", Priority::kInteractive, 1000), Arrival::kQueued);
  EXPECT_EQ(q.arrive(5, "b", Priority::kInteractive, 1000), Arrival::kQueued);
  // a: 2, b: 2. c holds none: it displaces the newest of a largest holder (ties: by name, a).
  ArrivalResult c = q.arrive(6, "c", Priority::kInteractive, 1000);
  EXPECT_EQ(c.arrival, Arrival::kQueued);
  ASSERT_TRUE(c.displaced);
  EXPECT_EQ(c.displaced->waiter_id, 3u);  // a's newest, whatever its class
  // a: 1, b: 2, c: 1. d displaces b's newest; then a fifth tenant finds 1 each and is refused.
  ArrivalResult d = q.arrive(7, "d", Priority::kBatch, 1000);
  ASSERT_TRUE(d.displaced);
  EXPECT_EQ(d.displaced->waiter_id, 5u);
  ArrivalResult e = q.arrive(8, "e", Priority::kInteractive, 1000);
  EXPECT_EQ(e.arrival, Arrival::kRejectedQueueFull);
  EXPECT_FALSE(e.displaced);
  EXPECT_EQ(q.depth(), 4);
}

// Without tenants every request is tenant "": a full queue refuses as before.
TEST(AdmissionQueue, OneTenantIsNeverDisplaced) {
  base::ManualClock clock;
  AdmissionQueue q({1, 2}, clock);
  EXPECT_EQ(q.arrive(1, "", Priority::kInteractive, 1000), Arrival::kAdmitted);
  EXPECT_EQ(q.arrive(2, "", Priority::kInteractive, 1000), Arrival::kQueued);
  EXPECT_EQ(q.arrive(3, "", Priority::kInteractive, 1000), Arrival::kQueued);
  ArrivalResult r = q.arrive(4, "", Priority::kInteractive, 1000);
  EXPECT_EQ(r.arrival, Arrival::kRejectedQueueFull);
  EXPECT_FALSE(r.displaced);
}

}  // namespace
}  // namespace cutline::policy
