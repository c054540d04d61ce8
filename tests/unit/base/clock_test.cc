#include "cutline/base/clock.h"

#include <gtest/gtest.h>

namespace cutline::base {
namespace {

TEST(ClockTest, ManualClockMovesOnlyWhenTold) {
  ManualClock clock(5'000'000);
  const Clock& c = clock;
  EXPECT_EQ(c.now_ms(), 5);
  clock.advance_ms(10);
  EXPECT_EQ(c.now_ns(), 15'000'000);
  EXPECT_EQ(c.now_us(), 15'000);
  clock.set_ns(1);
  EXPECT_EQ(c.now_ns(), 1);
}

TEST(ClockTest, MonotonicClockIsMonotonic) {
  MonotonicClock clock;
  int64_t last = clock.now_ns();
  for (int i = 0; i < 1000; ++i) {
    const int64_t now = clock.now_ns();
    ASSERT_GE(now, last);
    last = now;
  }
}

}  // namespace
}  // namespace cutline::base
