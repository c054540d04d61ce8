#pragma once
// Small statistics shared by the benchmarks in tests/bench.

#include <algorithm>
#include <vector>

namespace cutline::bench {

// The median of `v` (the mean of the middle two for an even count; 0 when empty).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace cutline::bench
