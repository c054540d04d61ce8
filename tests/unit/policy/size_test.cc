#include "cutline/policy/size.h"

#include <gtest/gtest.h>

namespace cutline::policy {
namespace {

TEST(Size, ParsesBinaryUnits) {
  EXPECT_EQ(parse_size_bytes("256MiB"), 256ll << 20);
  EXPECT_EQ(parse_size_bytes("2GiB"), 2ll << 30);
  EXPECT_EQ(parse_size_bytes("2g"), 2ll << 30);
  EXPECT_EQ(parse_size_bytes("1.5G"), 3ll << 29);
  EXPECT_EQ(parse_size_bytes("64KiB"), 64 * 1024);
  EXPECT_EQ(parse_size_bytes("64kb"), 64 * 1024);
  EXPECT_EQ(parse_size_bytes("1TiB"), 1ll << 40);
  EXPECT_EQ(parse_size_bytes("4096"), 4096);
  EXPECT_EQ(parse_size_bytes("4096B"), 4096);
  EXPECT_EQ(parse_size_bytes("0"), 0);
}

TEST(Size, RefusesWhatIsNotASize) {
  for (const char* bad : {"", "MiB", "-1MiB", "12 parsecs", "1.MiB", "1.5.5G", "1PiB", "1 MiB",
                          "99999999999999999999", "9000000000GiB", "0x10"}) {
    EXPECT_FALSE(parse_size_bytes(bad)) << bad;
  }
}

}  // namespace
}  // namespace cutline::policy
