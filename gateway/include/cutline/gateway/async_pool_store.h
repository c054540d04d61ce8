#pragma once
// AsyncPoolStore: token pools whose reserve and settle are asynchronous steps, so that a slow
// shared store never stalls an event loop (every stream on a worker shares its loop). The
// request path sees two calls:
//
//   store.reserve(spec, want, min, [](AsyncReservation r) { ... continue admission ... });
//   ... at finish:  r.settle(used_tokens);   (or let r go: its destructor refunds everything)
//
// `done` always runs exactly once, on the store's loop, never inline — also when the store
// fails (then per policy: fail open → the tokens come from this process's own buckets,
// r.source() == kLocal; fail closed → nothing is granted, r.source() == kRefused and the
// request is rejected and labeled as a budget refusal).
//
// AsyncRedisPoolStore (async_redis_pool_store.h) is the Redis implementation; AsyncMemoryStore
// below wraps a policy::PoolStore (the in-process MemoryPoolStore) behind the same interface.
//
// Threading: an AsyncPoolStore belongs to one EventLoop (the gateway keeps one per worker);
// call it and destroy its reservations on that loop's thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cutline/policy/token_pool.h"

namespace cutline::proto {
class EventLoop;
}

namespace cutline::gateway {

enum class ReservationSource : uint8_t {
  kShared,   // held in the shared store (Redis)
  kLocal,    // served by this process's buckets (memory store, or Redis failed: fail open)
  kRefused,  // the shared store failed and the policy says fail closed: nothing granted
};

class AsyncPoolStore;

// Tokens held by one request. Move-only; settles (refunding everything unused) when destroyed.
class AsyncReservation {
 public:
  AsyncReservation() = default;
  AsyncReservation(AsyncPoolStore* store, policy::PoolSpec spec, policy::PoolTake take,
                   std::string id, ReservationSource source)
      : store_(store), spec_(std::move(spec)), take_(take), id_(std::move(id)), source_(source) {
    hold();
  }
  AsyncReservation(AsyncReservation&& other) noexcept;
  AsyncReservation& operator=(AsyncReservation&& other) noexcept;
  AsyncReservation(const AsyncReservation&) = delete;
  AsyncReservation& operator=(const AsyncReservation&) = delete;
  ~AsyncReservation();

  const policy::PoolTake& take() const { return take_; }
  int64_t tokens() const { return take_.granted_tokens; }
  ReservationSource source() const { return source_; }
  const std::string& id() const { return id_; }  // the Redis reservation ("" when local)
  const policy::PoolSpec& spec() const { return spec_; }

  // Gives back tokens() - used_tokens (charges the excess). Idempotent. Fire-and-forget: a
  // failure to reach the store is counted by the store, and an unsettled Redis reservation is
  // refunded by Redis when it expires.
  void settle(int64_t used_tokens);
  // Forgets the reservation without settling: a shared reservation is then refunded by the
  // store when it expires (what happens when a gateway dies). For a fast shutdown.
  void abandon();

 private:
  bool holds() const {
    return store_ && source_ != ReservationSource::kRefused && take_.granted_tokens > 0;
  }
  void hold();  // counts the granted tokens in the store's held_tokens()

  AsyncPoolStore* store_ = nullptr;
  policy::PoolSpec spec_;
  policy::PoolTake take_;
  std::string id_;
  ReservationSource source_ = ReservationSource::kLocal;
};

class AsyncPoolStore {
 public:
  virtual ~AsyncPoolStore() = default;
  using ReserveDone = std::function<void(AsyncReservation)>;
  // Takes want_tokens, or all whole tokens if at least min_tokens (clamp), or nothing with a
  // retry_after_ms (PoolStore::take's contract).
  virtual void reserve(const policy::PoolSpec& spec, int64_t want_tokens, int64_t min_tokens,
                       ReserveDone done) = 0;
  // Called by AsyncReservation::settle: `reserved` tokens were held, `used` were used.
  virtual void settle(const AsyncReservation& r, int64_t used_tokens) = 0;
  // Calls that failed (cutline_budget_store_errors_total); readable from any thread.
  virtual uint64_t errors_total() const { return 0; }
  // Tokens granted to AsyncReservations of this store that are neither settled nor abandoned: 0
  // whenever no admitted request is running, so a leaked reservation shows
  // (cutline_pool_reserved_tokens). Readable from any thread.
  int64_t held_tokens() const { return held_tokens_.load(std::memory_order_relaxed); }

 private:
  friend class AsyncReservation;
  std::atomic<int64_t> held_tokens_{0};
};

// What one request holds from its rule's pools (policy::PoolGrant's asynchronous twin): filled
// at admission, settled at finish with the output tokens; destroyed unsettled, it refunds all.
// When the global pool clamps below what the tenant pool granted, the tenant pool holds the
// difference until finish (settle gives it back).
struct AsyncGrant {
  AsyncReservation tenant;
  AsyncReservation global;
  void settle(int64_t output_tokens) {
    tenant.settle(output_tokens);
    global.settle(output_tokens);
  }
};

// The in-process store behind the asynchronous interface: completes on the next loop iteration
// (a completion still pending when the store is destroyed refunds its tokens instead).
class AsyncMemoryStore final : public AsyncPoolStore {
 public:
  AsyncMemoryStore(proto::EventLoop& loop, policy::PoolStore& pools)
      : loop_(loop), pools_(pools), alive_(std::make_shared<char>(0)) {}
  void reserve(const policy::PoolSpec& spec, int64_t want_tokens, int64_t min_tokens,
               ReserveDone done) override;
  void settle(const AsyncReservation& r, int64_t used_tokens) override;

 private:
  proto::EventLoop& loop_;
  policy::PoolStore& pools_;
  std::shared_ptr<char> alive_;  // expires with the store: pending completions see it
};

}  // namespace cutline::gateway
