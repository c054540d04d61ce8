#pragma once
// Clock: the one monotonic clock every engine timing is taken on (queue, prefill, first decode,
// TTFT, decode). Injected so that tests control time; the default is std::chrono::steady_clock.
// now_us() is called on the engine thread and, for arrival stamps, on the thread calling
// Engine::add, so implementations must be thread-safe.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace cutline::engine {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t now_us() const = 0;
};

class SteadyClock final : public Clock {
 public:
  int64_t now_us() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to (tests, simulations).
class ManualClock final : public Clock {
 public:
  int64_t now_us() const override { return now_us_.load(); }
  void advance_us(int64_t us) { now_us_.fetch_add(us); }
  void set_us(int64_t us) { now_us_.store(us); }

 private:
  std::atomic<int64_t> now_us_{0};
};

}  // namespace cutline::engine
