#include "cutline/cli/progress.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cstdio>
#include <string>

namespace cutline::cli {
namespace {

std::string read_all(std::FILE* f) {
  std::rewind(f);
  std::string out;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

TEST(Progress, FormatsBytesInBinaryUnits) {
  EXPECT_EQ(Progress::format_bytes(100), "100 B");
  EXPECT_EQ(Progress::format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(Progress::format_bytes(512ll << 20), "512.0 MiB");
  EXPECT_EQ(Progress::format_bytes(3ll << 29), "1.5 GiB");
}

TEST(Progress, ALineSaysDoneOfTotal) {
  Progress p(stderr, "model", 1ll << 30, false);
  EXPECT_EQ(p.line(512ll << 20, false), "model  50% 512.0 MiB / 1.0 GiB");
  EXPECT_EQ(p.line(1ll << 30, true),
            "model [##############################] 100% 1.0 GiB / 1.0 GiB");
}

TEST(Progress, WithoutATerminalItLogsAtIntervalsAndOnceAtTheEnd) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(f, "model", 1000, false, /*log_interval_ms=*/3600 * 1000);
  for (int i = 0; i <= 1000; i += 10) p.update(i);  // within the interval: silent
  p.finish();
  const std::string out = read_all(f);
  EXPECT_EQ(out.rfind("model 100% 1000 B / 1000 B in ", 0), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos);
  std::fclose(f);
}

TEST(Progress, OnATerminalTheBarRedrawsInPlace) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(f, "model", 1000, true);
  p.finish();
  const std::string out = read_all(f);
  EXPECT_EQ(out.rfind("\rmodel [", 0), 0u) << out;
  EXPECT_NE(out.find("100%"), std::string::npos);
  std::fclose(f);
}

}  // namespace
}  // namespace cutline::cli
