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

TEST(ClockTest, ManualClockAdvancesInEachUnit) {
  ManualClock clock;
  clock.advance_us(3);
  clock.advance_ns(7);
  EXPECT_EQ(clock.now_ns(), 3'007);
  clock.advance_ms(2);
  EXPECT_EQ(clock.now_us(), 2'003);
}

TEST(ClockTest, WallTimeIsUnixTime) {
  // 2020-01-01 and 2100-01-01: any machine running this is between them, and a monotonic clock
  // (seconds since boot) never is.
  const double s = wall_time_s();
  EXPECT_GT(s, 1577836800.0);
  EXPECT_LT(s, 4102444800.0);
}

}  // namespace
}  // namespace cutline::base
