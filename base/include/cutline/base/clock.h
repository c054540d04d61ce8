#pragma once
// Time in Cutline comes in two kinds, and the names say which:
//
// - Clock is MONOTONIC: it never jumps, its origin is arbitrary (fixed for the clock's lifetime),
//   and it is what every measurement and decision reads (TTFT, inter-token gaps, queue wait, load
//   phases, token-bucket refills, "has the deadline passed?"). It is injected, never global:
//   production code receives a MonotonicClock, tests a ManualClock they advance by hand.
// - Wall time (wall_time_s) is the calendar time of the machine (Unix epoch). It is
//   only for timestamps shown to people and other processes ("created", access-log "ts", "loaded
//   at"); it may jump when the machine's time is set, so nothing is measured with it.
//
// Note: libevent's timers (Timer, connect/idle timeouts) wait in real time on the event loop; the
// Clock is what code uses to *measure* and to decide. A test that needs a timer to fire arms it
// with a short real delay and checks the decision against the injected clock.
//
// Thread-safety: now_ns() may be called from any thread on both implementations; so may the wall
// time functions.

#include <atomic>
#include <cstdint>

namespace cutline::base {

// A monotonic time source.
class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds since an arbitrary origin (fixed for the clock's lifetime).
  virtual int64_t now_ns() const = 0;

  int64_t now_us() const { return now_ns() / 1000; }
  int64_t now_ms() const { return now_ns() / 1000000; }
};

// std::chrono::steady_clock.
class MonotonicClock final : public Clock {
 public:
  int64_t now_ns() const override;
};

// A clock that moves only when told to. Starts at `start_ns`.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ns = 0) : now_ns_(start_ns) {}

  int64_t now_ns() const override { return now_ns_.load(std::memory_order_acquire); }
  void set_ns(int64_t ns) { now_ns_.store(ns, std::memory_order_release); }
  void advance_ns(int64_t delta_ns) { now_ns_.fetch_add(delta_ns, std::memory_order_acq_rel); }
  void advance_us(int64_t delta_us) { advance_ns(delta_us * 1000); }
  void advance_ms(int64_t delta_ms) { advance_ns(delta_ms * 1000000); }

 private:
  std::atomic<int64_t> now_ns_;
};

// Wall-clock seconds (std::chrono::system_clock) since the Unix epoch: for timestamps only.
double wall_time_s();

}  // namespace cutline::base
