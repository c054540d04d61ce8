#include "cutline/base/clock.h"

#include <chrono>

namespace cutline::base {

int64_t MonotonicClock::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace cutline::base
