// AdmissionDispatch: a freed admission slot reaches its waiter on the waiter's own worker loop,
// a waiter that is gone (or no longer waits) gives the slot back to the next one, and a reload
// that raises a group's limit admits its waiters. Real worker loops, no sockets.
#include "cutline/gateway/admission_dispatch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/worker_threads.h"
#include "support/wait_for.h"

namespace cutline::gateway {
namespace {

using policy::Arrival;
using policy::Priority;

// A queued request: counts the slots it is offered and the loop they arrive on.
struct FakeWaiter final : AdmissionWaiter {
  FakeWaiter(proto::EventLoop& own_loop, bool take) : loop(own_loop), takes(take) {}
  bool on_admitted() override {
    if (loop.in_loop_thread()) on_own_loop.fetch_add(1);
    offered.fetch_add(1);
    return takes;
  }
  void on_displaced() override { displaced.fetch_add(1); }
  proto::EventLoop& loop;
  const bool takes;  // false: it ended meanwhile and declines the slot
  std::atomic<int> offered{0};
  std::atomic<int> on_own_loop{0};
  std::atomic<int> displaced{0};
};

policy::Policy policy_with(std::optional<int64_t> max_concurrent, int64_t queue_depth) {
  policy::Policy p;
  p.admission_groups.push_back(policy::AdmissionGroup{"g", max_concurrent, queue_depth});
  return p;
}

// Releases one slot of `queue` the way a finishing stream does, on `loop`.
void release_on(proto::EventLoop& loop, AdmissionDispatch& dispatch,
                policy::AdmissionQueue& queue) {
  loop.post([&dispatch, &queue] {
    std::vector<policy::Dequeued> next;
    if (auto d = queue.release()) next.push_back(*d);
    dispatch.dispatch_admitted(queue, std::move(next));
  });
}

TEST(AdmissionDispatch, SlotFreedOnOneLoopReachesTheWaiterOnItsOwnLoop) {
  base::ManualClock clock(1'000'000'000);
  AdmissionDispatch dispatch(clock);
  const policy::Policy p = policy_with(1, 4);
  dispatch.set_limits(p);
  policy::AdmissionQueue& queue = dispatch.queue_for(p.admission_groups[0]);
  proto::WorkerThreads workers(2);
  workers.start();

  ASSERT_EQ(queue.arrive(1, "a", Priority::kInteractive, 1000), Arrival::kAdmitted);
  ASSERT_EQ(queue.arrive(2, "a", Priority::kInteractive, 1000), Arrival::kQueued);
  auto waiter = std::make_shared<FakeWaiter>(workers.loop(1), true);
  dispatch.register_waiter(2, &workers.loop(1), waiter);

  release_on(workers.loop(0), dispatch, queue);
  ASSERT_TRUE(test::wait_for([&] { return waiter->offered.load() == 1; }));
  EXPECT_EQ(waiter->on_own_loop.load(), 1);
  EXPECT_EQ(queue.in_flight(), 1);  // the slot moved from request 1 to request 2
  EXPECT_EQ(queue.depth(), 0);
  workers.stop();
}

TEST(AdmissionDispatch, AWaiterThatIsGoneGivesItsSlotToTheNext) {
  base::ManualClock clock(1'000'000'000);
  AdmissionDispatch dispatch(clock);
  const policy::Policy p = policy_with(1, 8);
  dispatch.set_limits(p);
  policy::AdmissionQueue& queue = dispatch.queue_for(p.admission_groups[0]);
  proto::WorkerThreads workers(2);
  workers.start();

  ASSERT_EQ(queue.arrive(1, "a", Priority::kInteractive, 1000), Arrival::kAdmitted);
  for (uint64_t id = 2; id <= 5; ++id) {
    ASSERT_EQ(queue.arrive(id, "a", Priority::kInteractive, 1000), Arrival::kQueued);
  }
  // 2 stopped waiting (unregistered), 3's stream was destroyed, 4 ended before its slot came
  // (declines): each gives the slot back, and 5 is served.
  auto unregistered = std::make_shared<FakeWaiter>(workers.loop(0), true);
  dispatch.register_waiter(2, &workers.loop(0), unregistered);
  dispatch.unregister_waiter(2);
  auto destroyed = std::make_shared<FakeWaiter>(workers.loop(1), true);
  dispatch.register_waiter(3, &workers.loop(1), destroyed);
  destroyed.reset();
  auto declines = std::make_shared<FakeWaiter>(workers.loop(0), false);
  dispatch.register_waiter(4, &workers.loop(0), declines);
  auto takes = std::make_shared<FakeWaiter>(workers.loop(1), true);
  dispatch.register_waiter(5, &workers.loop(1), takes);

  release_on(workers.loop(0), dispatch, queue);
  ASSERT_TRUE(test::wait_for([&] { return takes->offered.load() == 1; }));
  EXPECT_EQ(unregistered->offered.load(), 0);
  EXPECT_EQ(declines->offered.load(), 1);
  EXPECT_EQ(takes->on_own_loop.load(), 1);
  EXPECT_EQ(queue.in_flight(), 1);  // exactly one slot held: 5's
  EXPECT_EQ(queue.depth(), 0);

  // 5 finishes with nobody waiting: the slot is free again.
  release_on(workers.loop(1), dispatch, queue);
  ASSERT_TRUE(test::wait_for([&] { return queue.in_flight() == 0; }));
  workers.stop();
}

// A waiter displaced by another tenant's arrival is told on its own loop, also when it had not
// registered yet (it arrived on another worker a moment before).
TEST(AdmissionDispatch, ADisplacedWaiterIsToldOnItsOwnLoop) {
  base::ManualClock clock(1'000'000'000);
  AdmissionDispatch dispatch(clock);
  const policy::Policy p = policy_with(1, 2);
  dispatch.set_limits(p);
  policy::AdmissionQueue& queue = dispatch.queue_for(p.admission_groups[0]);
  proto::WorkerThreads workers(2);
  workers.start();

  ASSERT_EQ(queue.arrive(1, "a", Priority::kInteractive, 1000), Arrival::kAdmitted);
  ASSERT_EQ(queue.arrive(2, "a", Priority::kInteractive, 1000), Arrival::kQueued);
  ASSERT_EQ(queue.arrive(3, "a", Priority::kInteractive, 1000), Arrival::kQueued);
  auto registered = std::make_shared<FakeWaiter>(workers.loop(0), true);
  dispatch.register_waiter(3, &workers.loop(0), registered);
  policy::ArrivalResult b = queue.arrive(4, "b", Priority::kInteractive, 1000);
  ASSERT_TRUE(b.displaced);
  EXPECT_EQ(b.displaced->waiter_id, 3u);
  dispatch.dispatch_displaced(*b.displaced);
  ASSERT_TRUE(test::wait_for([&] { return registered->displaced.load() == 1; }));

  // 2 has not registered yet when c displaces it: it is told as it registers.
  policy::ArrivalResult c = queue.arrive(5, "c", Priority::kInteractive, 1000);
  ASSERT_FALSE(c.displaced);  // a: 1, b: 1 — c is refused, nobody holds two more
  EXPECT_EQ(c.arrival, Arrival::kRejectedQueueFull);
  dispatch.dispatch_displaced(policy::Dequeued{2});
  auto late = std::make_shared<FakeWaiter>(workers.loop(1), true);
  dispatch.register_waiter(2, &workers.loop(1), late);
  ASSERT_TRUE(test::wait_for([&] { return late->displaced.load() == 1; }));
  EXPECT_EQ(registered->offered.load(), 0);
  workers.stop();
}

TEST(AdmissionDispatch, AReloadThatRaisesTheLimitAdmitsTheWaiters) {
  base::ManualClock clock(1'000'000'000);
  AdmissionDispatch dispatch(clock);
  dispatch.set_limits(policy_with(1, 4));
  const policy::Policy raised = policy_with(3, 4);
  policy::AdmissionQueue& queue = dispatch.queue_for(raised.admission_groups[0]);
  proto::WorkerThreads workers(2);
  workers.start();

  ASSERT_EQ(queue.arrive(1, "a", Priority::kInteractive, 1000), Arrival::kAdmitted);
  ASSERT_EQ(queue.arrive(2, "a", Priority::kInteractive, 1000), Arrival::kQueued);
  ASSERT_EQ(queue.arrive(3, "b", Priority::kBatch, 1000), Arrival::kQueued);
  auto on_0 = std::make_shared<FakeWaiter>(workers.loop(0), true);
  auto on_1 = std::make_shared<FakeWaiter>(workers.loop(1), true);
  dispatch.register_waiter(2, &workers.loop(0), on_0);
  dispatch.register_waiter(3, &workers.loop(1), on_1);

  dispatch.set_limits(raised);  // the controlling thread's reload
  ASSERT_TRUE(
      test::wait_for([&] { return on_0->offered.load() == 1 && on_1->offered.load() == 1; }));
  EXPECT_EQ(on_0->on_own_loop.load(), 1);
  EXPECT_EQ(on_1->on_own_loop.load(), 1);
  EXPECT_EQ(&dispatch.queue_for(raised.admission_groups[0]), &queue);  // kept across reloads
  EXPECT_EQ(queue.in_flight(), 3);
  EXPECT_EQ(queue.depth(), 0);
  workers.stop();
}

}  // namespace
}  // namespace cutline::gateway
