#pragma once
// Progress: "bytes done of total" for long work on the command line (writing a model, loading
// one). On a terminal it redraws one bar line in place; otherwise (a log file, a pipe, systemd's
// journal) it prints a line every `log_interval_ms` and a last one at finish(), so logs show
// that the work moves without one line per chunk. Not thread-safe: one caller updates it.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace cutline::cli {

class Progress {
 public:
  // `tty`: draw a bar (callers pass isatty(fileno(out))).
  Progress(std::FILE* out, std::string what, int64_t total_bytes, bool tty,
           int64_t log_interval_ms = 3000);
  // Sets the bytes done so far (monotonic); redraws at most every 100 ms on a TTY.
  void update(int64_t done_bytes);
  // The final state: a full bar and a newline on a TTY, a last line otherwise.
  void finish();

  // "1.5 GiB", "512.0 MiB", "12.0 KiB", "100 B".
  static std::string format_bytes(int64_t bytes);
  // The text of one update: "WHAT [#####.....]  50% 512.0 MiB / 1.0 GiB" (bar when `bar`).
  std::string line(int64_t done_bytes, bool bar) const;

 private:
  using Clock = std::chrono::steady_clock;
  std::FILE* out_;
  std::string what_;
  int64_t total_;
  bool tty_;
  int64_t interval_ms_;
  int64_t done_ = 0;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = Clock::now();
  bool finished_ = false;
};

}  // namespace cutline::cli
