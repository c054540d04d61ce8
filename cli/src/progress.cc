#include "cutline/cli/progress.h"

#include <algorithm>
#include <utility>

namespace cutline::cli {

Progress::Progress(std::FILE* out, std::string what, int64_t total_bytes, bool tty,
                   int64_t log_interval_ms)
    : out_(out),
      what_(std::move(what)),
      total_(std::max<int64_t>(total_bytes, 0)),
      tty_(tty),
      interval_ms_(log_interval_ms) {}

std::string Progress::format_bytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  }
  return buf;
}

std::string Progress::line(int64_t done_bytes, bool bar) const {
  const double frac =
      total_ > 0 ? std::clamp(static_cast<double>(done_bytes) / total_, 0.0, 1.0) : 0.0;
  std::string out = what_ + " ";
  if (bar) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    out += "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] ";
  }
  char pct[16];
  std::snprintf(pct, sizeof pct, "%3d%% ", static_cast<int>(frac * 100));
  return out + pct + format_bytes(done_bytes) + " / " + format_bytes(total_);
}

void Progress::update(int64_t done_bytes) {
  done_ = std::max(done_, done_bytes);
  const auto now = Clock::now();
  const auto since_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_).count();
  if (tty_) {
    if (since_ms < 100) return;
    std::fprintf(out_, "\r%s", line(done_, true).c_str());
  } else {
    if (since_ms < interval_ms_) return;
    std::fprintf(out_, "%s\n", line(done_, false).c_str());
  }
  std::fflush(out_);
  last_ = now;
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  done_ = std::max(done_, total_);
  const double s = std::chrono::duration<double>(Clock::now() - start_).count();
  char took[32];
  std::snprintf(took, sizeof took, " in %.1f s", s);
  if (tty_) {
    std::fprintf(out_, "\r%s%s\n", line(done_, true).c_str(), took);
  } else {
    std::fprintf(out_, "%s%s\n", line(done_, false).c_str(), took);
  }
  std::fflush(out_);
}

}  // namespace cutline::cli
