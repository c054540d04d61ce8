#include "cutline/proto/clock.h"

#include <chrono>

namespace cutline::proto {

int64_t SystemClock::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace cutline::proto
