#pragma once
// Prefix affinity for an upstream pool: the key of a request (the first N bytes, or N
// pre-tokenizer words, of its rendered prompt) hashed onto a consistent-hash ring of the pool's
// endpoints. Requests that share a prefix start at the same place on the ring, so they land on
// the same endpoint and its prefix cache hits; when endpoints come and go, only the keys of
// the changed ones move. The pool walks the ring from the key's position to the first
// endpoint that is available and within the load bound (bounded-load consistent hashing,
// Mirrokni et al.): no endpoint gets more than max_load_factor times the average.
//
// Built once per endpoint set (construction sorts ~100 points per endpoint); lookups are a
// binary search. Immutable after construction, so shared by every worker.

#include <cstdint>
#include <string_view>
#include <vector>

#include "cutline/policy/policy.h"

namespace cutline::gateway {

// The part of `prompt` that decides affinity: the first `length` bytes, or the bytes up to the
// end of the first `length` words (a word: a run of letters/digits, or one other non-space
// character, the way BPE pre-tokenizers split text). Shorter prompts are taken whole.
std::string_view affinity_prefix(std::string_view prompt, policy::AffinityUnit unit,
                                 int64_t length);

// 64-bit FNV-1a followed by a mixer (well spread for short keys; stable across processes, so
// every gateway replica maps a prefix to the same endpoint).
uint64_t affinity_hash(std::string_view key);

class PrefixRing {
 public:
  static constexpr int kPointsPerEndpoint = 100;

  // `endpoint_count` endpoints identified by their index 0..n-1 and a stable name each (their
  // label "host:port", so every replica builds the same ring).
  explicit PrefixRing(const std::vector<std::string_view>& endpoint_names);

  // Walks the ring from `hash`: calls accept(index) for each distinct endpoint in ring order
  // until it returns true; returns that index, or -1 when none was accepted.
  template <typename Accept>
  int walk(uint64_t hash, Accept&& accept) const;

  size_t endpoint_count() const { return endpoint_count_; }

 private:
  struct Point {
    uint64_t hash;
    uint32_t endpoint;
  };
  size_t first_at_or_after(uint64_t hash) const;

  std::vector<Point> points_;  // sorted by hash
  size_t endpoint_count_ = 0;
};

template <typename Accept>
int PrefixRing::walk(uint64_t hash, Accept&& accept) const {
  if (points_.empty()) return -1;
  // Endpoints already offered: a bit mask for pools of up to 64 (no allocation), else a vector.
  uint64_t seen_mask = 0;
  std::vector<bool> seen_big(endpoint_count_ > 64 ? endpoint_count_ : 0, false);
  size_t distinct = 0;
  const size_t start = first_at_or_after(hash);
  for (size_t step = 0; step < points_.size() && distinct < endpoint_count_; ++step) {
    const uint32_t e = points_[(start + step) % points_.size()].endpoint;
    if (endpoint_count_ <= 64) {
      if (seen_mask & (uint64_t{1} << e)) continue;
      seen_mask |= uint64_t{1} << e;
    } else {
      if (seen_big[e]) continue;
      seen_big[e] = true;
    }
    ++distinct;
    if (accept(static_cast<int>(e))) return static_cast<int>(e);
  }
  return -1;
}

}  // namespace cutline::gateway
