#pragma once
// Counter-based random numbers: the n-th draw of a stream is a pure function of (seed, n).
// A sequence's sampler uses draw n = its n-th output token, so what other sequences do (batch
// composition, chunking, preemption and recompute) can never shift its stream.

#include <cstdint>

namespace cutline::engine {

// SplitMix64 finalizer: a bijective 64-bit mix with full avalanche.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// 64 random bits for draw `index` of stream `seed`.
constexpr uint64_t counter_bits(uint64_t seed, uint64_t index) {
  return mix64(mix64(seed) ^ mix64(index + 0x632BE59BD9B4E019ull));
}

// Uniform double in [0, 1) with 53 random bits, for draw `index` of stream `seed`.
constexpr double counter_uniform(uint64_t seed, uint64_t index) {
  return static_cast<double>(counter_bits(seed, index) >> 11) * 0x1.0p-53;
}

}  // namespace cutline::engine
