#include "cutline/proto/net/event_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "cutline/proto/net/timer.h"
#include "cutline/proto/net/worker_threads.h"

namespace cutline::proto {
namespace {

TEST(EventLoopTest, PostFromOtherThreadsRunsInOrderOnTheLoopThread) {
  EventLoop loop;
  std::vector<int> seen;
  std::thread::id loop_thread;
  std::thread runner([&] {
    loop_thread = std::this_thread::get_id();
    loop.run();
  });
  for (int i = 0; i < 100; ++i) {
    loop.post([&, i] {
      EXPECT_TRUE(loop.in_loop_thread());
      seen.push_back(i);
      if (i == 99) loop.stop();
    });
  }
  runner.join();
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], i);
  EXPECT_FALSE(loop.in_loop_thread());
}

TEST(EventLoopTest, PostIsNeverInlineAndStopBeforeRunReturnsAtOnce) {
  EventLoop loop;
  bool ran = false;
  bool inner = false;
  loop.post([&] {
    loop.post([&] {
      inner = true;
      loop.stop();
    });
    EXPECT_FALSE(inner);  // queued, not run inside post()
    ran = true;
  });
  loop.run();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(inner);
  loop.stop();
  loop.run();  // returns at once
}

TEST(WorkerThreadsTest, RunOnAllAndWaitReachesEveryLoop) {
  WorkerThreads workers(3);
  workers.start();
  std::atomic<int> mask{0};
  workers.run_on_all_and_wait([&](EventLoop& loop) {
    EXPECT_TRUE(loop.in_loop_thread());
    mask.fetch_or(1 << loop.index());
  });
  EXPECT_EQ(mask.load(), 0b111);
  workers.stop();
  EXPECT_FALSE(workers.running());
}

TEST(TimerTest, OneShotPeriodicAndCancel) {
  EventLoop loop;
  int one_shot = 0;
  int periodic = 0;
  bool cancelled_fired = false;
  Timer cancelled(loop, [&] { cancelled_fired = true; });
  Timer periodic_timer(loop, [&] {
    if (++periodic == 3) loop.stop();
  });
  Timer once(loop, [&] { ++one_shot; });
  once.arm(0);
  EXPECT_TRUE(once.armed());
  cancelled.arm(1);
  cancelled.cancel();
  EXPECT_FALSE(cancelled.armed());
  periodic_timer.arm_periodic(1);
  loop.run();
  EXPECT_EQ(one_shot, 1);
  EXPECT_FALSE(once.armed());
  EXPECT_EQ(periodic, 3);
  EXPECT_FALSE(cancelled_fired);
}

// release() disarms like cancel() (the callback never runs) and a later arm() works again.
TEST(TimerTest, ReleasedTimerNeverFiresAndCanBeArmedAgain) {
  EventLoop loop;
  int fired = 0;
  Timer released(loop, [&] {
    ++fired;
    loop.stop();
  });
  released.arm(0);
  released.release();
  EXPECT_FALSE(released.armed());
  released.release();  // twice: no effect
  Timer stopper(loop, [&] { loop.stop(); });
  stopper.arm(5);
  loop.run();
  EXPECT_EQ(fired, 0);
  released.arm_periodic(1);
  released.release();
  released.arm(1);
  EXPECT_TRUE(released.armed());
  loop.run();
  EXPECT_EQ(fired, 1);
  EXPECT_FALSE(released.armed());  // one-shot again after the periodic arming was released
}

TEST(TimerTest, CallbackMayDestroyItsOwnTimer) {
  EventLoop loop;
  auto timer = std::make_unique<Timer>(loop, [] {});
  bool fired = false;
  timer = std::make_unique<Timer>(loop, [&] {
    fired = true;
    timer.reset();
    loop.stop();
  });
  timer->arm(0);
  loop.run();
  EXPECT_TRUE(fired);
  EXPECT_EQ(timer, nullptr);
}

}  // namespace
}  // namespace cutline::proto
