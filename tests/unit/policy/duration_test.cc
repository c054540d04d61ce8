#include "cutline/policy/duration.h"

#include <gtest/gtest.h>

namespace cutline::policy {
namespace {

TEST(Duration, ParsesMillisecondsSecondsAndMinutes) {
  EXPECT_EQ(parse_duration_ms("250ms"), 250);
  EXPECT_EQ(parse_duration_ms("10s"), 10000);
  EXPECT_EQ(parse_duration_ms("2m"), 120000);
  EXPECT_EQ(parse_duration_ms("1.5s"), 1500);
  EXPECT_EQ(parse_duration_ms("0.1ms"), 1);  // rounded up, never to zero
  EXPECT_EQ(parse_duration_ms("0s"), 0);     // parsed; the loader refuses zero limits
}

TEST(Duration, RefusesMissingUnitsUnknownUnitsAndJunk) {
  for (const char* bad : {"", "10", "s", "10h", "10 s", "-1s", "1.s", ".5s", "10sec", "1e3ms",
                          "99999999999999999999ms", "40000m"}) {
    EXPECT_FALSE(parse_duration_ms(bad)) << bad;
  }
}

TEST(Duration, FormatsTheShortestExactSpelling) {
  EXPECT_EQ(format_duration_ms(60000), "1m");
  EXPECT_EQ(format_duration_ms(10000), "10s");
  EXPECT_EQ(format_duration_ms(1500), "1500ms");
  EXPECT_EQ(format_duration_ms(0), "0ms");
}

}  // namespace
}  // namespace cutline::policy
