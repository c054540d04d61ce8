#pragma once
// Waiting, with a timeout, for state that no callback signals: a server's connection count, a
// child process's exit, a line in a log file, a key in Redis. Where a callback does signal the
// change, wait on a condition variable instead (tests/unit/proto/net_test_util.h: Notes::wait_for).

#include <chrono>
#include <functional>
#include <thread>

namespace cutline::test {

// Polls `cond` every `poll_ms` until it holds (true) or `timeout_ms` has passed (false). `cond` is
// checked once more after the timeout, so a slow last poll still counts.
inline bool wait_for(const std::function<bool()>& cond, int timeout_ms = 5000, int poll_ms = 5) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  return true;
}

}  // namespace cutline::test
