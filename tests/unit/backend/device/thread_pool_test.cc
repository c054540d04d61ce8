// ThreadPool: every task of every run runs exactly once, runs never overlap, and a worker that
// wakes late never runs a finished run's function (2,000 back-to-back runs of varying sizes, up
// to hundreds of tasks, which threads claim several at a time).
#include "cutline/device/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace cutline::device {
namespace {

TEST(ThreadPool, EveryTaskOnceAcrossManyShortRuns) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (int run = 0; run < 2000; ++run) {
    const int64_t n = run % 2 == 0 ? 1 + (run * 7) % 23 : 1 + (run * 37) % 301;
    std::vector<std::atomic<int>> hits(n);
    std::atomic<int> bad_thread{0};
    pool.run(n, [&](int64_t task, int32_t thread) {
      if (thread < 0 || thread >= 3) bad_thread.fetch_add(1);
      hits[task].fetch_add(1);
    });
    for (int64_t t = 0; t < n; ++t) ASSERT_EQ(hits[t].load(), 1) << "run " << run << " task " << t;
    ASSERT_EQ(bad_thread.load(), 0);
  }
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  std::vector<int64_t> order;
  pool.run(5, [&](int64_t task, int32_t thread) {
    EXPECT_EQ(thread, 0);
    order.push_back(task);
  });
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  pool.run(0, [&](int64_t, int32_t) { ADD_FAILURE() << "no tasks, no calls"; });
}

}  // namespace
}  // namespace cutline::device
