// Token buckets in memory and the RAII reservation (token_pool.h).
#include "cutline/policy/token_pool.h"

#include <algorithm>
#include <cmath>

namespace cutline::policy {

namespace {

constexpr uint64_t kPruneEvery = 4096;
constexpr double kNsPerMinute = 60e9;
// The deepest debt a bucket can reach, in minutes of its rate: use beyond it (an upstream
// reporting an absurd count) is not charged, so no report can lock a pool for longer than it
// takes to refill from there.
constexpr double kMaxDebtMinutes = 1;
// Longest Retry-After a refusal names: from the deepest debt to full. A request asking for more
// than the capacity can never pass; it is told to retry no later than that, not years later.
constexpr double kMaxRetryNs = (kMaxDebtMinutes + 1) * kNsPerMinute;

}  // namespace

MemoryPoolStore::Bucket& MemoryPoolStore::bucket_locked(const PoolSpec& spec, int64_t now_ns) {
  auto [it, inserted] = buckets_.try_emplace(spec.key);
  Bucket& b = it->second;
  const double capacity = static_cast<double>(spec.tokens_per_minute);
  if (inserted) {
    b.tokens = capacity;
  } else {
    // Refill at the rate in force now (a reload may have changed it).
    const int64_t elapsed_ns = std::max<int64_t>(0, now_ns - b.updated_ns);
    b.tokens += static_cast<double>(elapsed_ns) * capacity / kNsPerMinute;
  }
  b.tokens = std::min(b.tokens, capacity);
  b.updated_ns = now_ns;
  b.tokens_per_minute = spec.tokens_per_minute;
  return b;
}

PoolTake MemoryPoolStore::take(const PoolSpec& spec, int64_t want_tokens, int64_t min_tokens) {
  const int64_t now_ns = clock_.now_ns();
  PoolTake out;
  bool prune_now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Bucket& b = bucket_locked(spec, now_ns);
    const int64_t whole = static_cast<int64_t>(std::floor(b.tokens));
    out.available_tokens = whole;
    // The contract is 0 < min_tokens <= want_tokens; a caller that breaks it gets nothing
    // rather than a negative take that would fill the bucket.
    if (want_tokens < 1) want_tokens = min_tokens = INT64_MAX;
    min_tokens = std::clamp<int64_t>(min_tokens, 1, want_tokens);
    if (whole >= want_tokens) {
      out.granted_tokens = want_tokens;
    } else if (whole >= min_tokens) {
      out.granted_tokens = whole;
    } else {
      // Time for the bucket to hold min_tokens at tokens_per_minute / 60e9 per ns.
      const double missing = static_cast<double>(min_tokens) - b.tokens;
      const double ns = std::min(
          kMaxRetryNs, missing * kNsPerMinute / static_cast<double>(spec.tokens_per_minute));
      out.retry_after_ms = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(ns / 1e6)));
    }
    b.tokens -= static_cast<double>(out.granted_tokens);
    // Bound memory: buckets of tenants gone quiet are dropped once they are full again.
    if (++ops_since_prune_ >= kPruneEvery) {
      ops_since_prune_ = 0;
      prune_now = true;
    }
  }
  if (prune_now) prune();
  return out;
}

void MemoryPoolStore::refund(const PoolSpec& spec, int64_t tokens) {
  const int64_t now_ns = clock_.now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  Bucket& b = bucket_locked(spec, now_ns);
  const double capacity = static_cast<double>(spec.tokens_per_minute);
  b.tokens =
      std::clamp(b.tokens + static_cast<double>(tokens), -kMaxDebtMinutes * capacity, capacity);
}

int64_t MemoryPoolStore::available(const PoolSpec& spec) {
  const int64_t now_ns = clock_.now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(spec.key);
  if (it == buckets_.end()) return spec.tokens_per_minute;
  return static_cast<int64_t>(std::floor(bucket_locked(spec, now_ns).tokens));
}

void MemoryPoolStore::prune() {
  const int64_t now_ns = clock_.now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const Bucket& b = it->second;
    const double capacity = static_cast<double>(b.tokens_per_minute);
    const double level =
        b.tokens +
        static_cast<double>(std::max<int64_t>(0, now_ns - b.updated_ns)) * capacity / kNsPerMinute;
    if (level >= capacity) {
      it = buckets_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t MemoryPoolStore::bucket_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_.size();
}

Reservation::Reservation(Reservation&& other) noexcept
    : store_(other.store_), spec_(std::move(other.spec_)), tokens_(other.tokens_) {
  other.store_ = nullptr;
  other.tokens_ = 0;
}

Reservation& Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    settle(0);  // give back what this one held
    store_ = other.store_;
    spec_ = std::move(other.spec_);
    tokens_ = other.tokens_;
    other.store_ = nullptr;
    other.tokens_ = 0;
  }
  return *this;
}

Reservation::~Reservation() { settle(0); }

void Reservation::settle(int64_t used_tokens) {
  if (store_ == nullptr) return;
  // Both are >= 0, so the difference cannot overflow.
  const int64_t back = tokens_ - std::max<int64_t>(0, used_tokens);
  if (back != 0) store_->refund(spec_, back);
  store_->held_tokens_.fetch_sub(tokens_, std::memory_order_relaxed);
  store_ = nullptr;
}

void Reservation::shrink_to(int64_t tokens) {
  if (store_ == nullptr || tokens >= tokens_) return;
  store_->refund(spec_, tokens_ - std::max<int64_t>(0, tokens));
  store_->held_tokens_.fetch_sub(tokens_ - std::max<int64_t>(0, tokens), std::memory_order_relaxed);
  tokens_ = std::max<int64_t>(0, tokens);
}

}  // namespace cutline::policy
