#pragma once
// Token pools: token buckets that refill continuously. A bucket of `tokens_per_minute` holds at
// most tokens_per_minute tokens (one minute of burst) and refills at tokens_per_minute / 60 per
// second, on the injected Clock. A bucket is created full on first use; a bucket that has
// refilled to capacity is indistinguishable from a new one and may be dropped (prune()).
//
// A request reserves its effective max output tokens at admission (take) and gives back what it
// did not use at finish (Reservation::settle). Reservation is RAII: one that is destroyed without
// settle() refunds everything it holds, so a cancelled, cut or failed request can never leak
// tokens. Use more than was reserved (an upstream ignoring the clamp) is charged: the bucket may
// go below zero (debt), delaying the next requests — down to minus one minute of its rate at
// most, so that no usage report, however absurd, locks a pool for longer than two minutes.
// Every count a caller passes is checked: a take of no tokens (or of a negative count, the
// result of an overflow upstream) is refused, never turned into a refill.
//
// PoolStore is the seam for shared pools: MemoryPoolStore serves one gateway process;
// `budget_store: redis://…` makes the gateway plug in a Redis-backed store with the same
// semantics (the take/refund primitives map onto one Lua script each).
//
// Thread-safety: PoolStore implementations must be safe for concurrent use from every gateway
// worker thread. MemoryPoolStore uses one mutex (held for a hash lookup and a few arithmetic
// operations). A Reservation itself is not shared between threads.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "cutline/base/clock.h"

namespace cutline::policy {

struct PoolSpec {
  std::string key;                // bucket name (PoolRef::key)
  int64_t tokens_per_minute = 0;  // > 0; also the capacity. A changed rate (reload) applies from
                                  // the next call, the level clamped to the new capacity.
};

struct PoolTake {
  int64_t granted_tokens = 0;    // 0 = refused
  int64_t available_tokens = 0;  // whole tokens in the bucket before the take (may be < 0: debt)
  // When refused: milliseconds until min_tokens will be available at the refill rate (>= 1).
  int64_t retry_after_ms = 0;
};

class PoolStore {
 public:
  virtual ~PoolStore() = default;

  // Takes `want_tokens` if the bucket holds them; otherwise takes all whole tokens it holds if
  // that is at least `min_tokens` (clamp); otherwise takes nothing and says when to retry.
  // Pass min_tokens == want_tokens for all-or-nothing. Requires 0 < min_tokens <= want_tokens:
  // want_tokens < 1 is refused, min_tokens is clamped into [1, want_tokens].
  virtual PoolTake take(const PoolSpec& spec, int64_t want_tokens, int64_t min_tokens) = 0;

  // Adds `tokens` back (capped at capacity); a negative value charges extra (debt allowed).
  virtual void refund(const PoolSpec& spec, int64_t tokens) = 0;

  // Whole tokens in the bucket now (full capacity for an unknown key).
  virtual int64_t available(const PoolSpec& spec) = 0;

  // Tokens held now by Reservations over this store that are not settled yet: 0 whenever no
  // admitted request is running (a leaked reservation shows here; gateway:
  // cutline_pool_reserved_tokens).
  int64_t held_tokens() const { return held_tokens_.load(std::memory_order_relaxed); }

 private:
  friend class Reservation;
  std::atomic<int64_t> held_tokens_{0};
};

// One process's pools, in memory.
class MemoryPoolStore final : public PoolStore {
 public:
  explicit MemoryPoolStore(const base::Clock& clock) : clock_(clock) {}

  PoolTake take(const PoolSpec& spec, int64_t want_tokens, int64_t min_tokens) override;
  void refund(const PoolSpec& spec, int64_t tokens) override;
  int64_t available(const PoolSpec& spec) override;

  // Drops buckets that have refilled to capacity (they equal fresh ones). Called automatically
  // every few thousand operations; public for tests and for an idle timer.
  void prune();
  size_t bucket_count() const;

 private:
  struct Bucket {
    double tokens = 0;
    int64_t updated_ns = 0;
    int64_t tokens_per_minute = 0;
  };
  Bucket& bucket_locked(const PoolSpec& spec, int64_t now_ns);

  const base::Clock& clock_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
  uint64_t ops_since_prune_ = 0;
};

// Tokens held from one pool by one request. Move-only. The PoolStore must outlive it.
class Reservation {
 public:
  Reservation() = default;
  Reservation(PoolStore* store, PoolSpec spec, int64_t tokens)
      : store_(store), spec_(std::move(spec)), tokens_(tokens) {
    if (store_) store_->held_tokens_.fetch_add(tokens_, std::memory_order_relaxed);
  }
  Reservation(Reservation&& other) noexcept;
  Reservation& operator=(Reservation&& other) noexcept;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  // Refunds every token still held (a request that never settled used nothing we know of).
  ~Reservation();

  // At finish: refunds tokens() - used_tokens (charges the excess when used > tokens()).
  // Idempotent: a second call does nothing.
  void settle(int64_t used_tokens);

  // Gives back everything above `tokens` now (used when a second pool clamps further).
  void shrink_to(int64_t tokens);

  bool active() const { return store_ != nullptr; }
  int64_t tokens() const { return tokens_; }
  const PoolSpec& spec() const { return spec_; }

 private:
  PoolStore* store_ = nullptr;
  PoolSpec spec_;
  int64_t tokens_ = 0;
};

}  // namespace cutline::policy
