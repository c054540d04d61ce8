// The asynchronous token-pool interface and its in-process implementation (async_pool_store.h).
#include "cutline/gateway/async_pool_store.h"

#include <algorithm>

#include "cutline/proto/net/event_loop.h"

namespace cutline::gateway {

AsyncReservation::AsyncReservation(AsyncReservation&& other) noexcept
    : store_(other.store_),
      spec_(std::move(other.spec_)),
      take_(other.take_),
      id_(std::move(other.id_)),
      source_(other.source_) {
  other.store_ = nullptr;
}

AsyncReservation& AsyncReservation::operator=(AsyncReservation&& other) noexcept {
  if (this != &other) {
    settle(0);
    store_ = other.store_;
    spec_ = std::move(other.spec_);
    take_ = other.take_;
    id_ = std::move(other.id_);
    source_ = other.source_;
    other.store_ = nullptr;
  }
  return *this;
}

AsyncReservation::~AsyncReservation() { settle(0); }

void AsyncReservation::hold() {
  if (holds()) store_->held_tokens_.fetch_add(take_.granted_tokens, std::memory_order_relaxed);
}

void AsyncReservation::abandon() {
  if (holds()) store_->held_tokens_.fetch_sub(take_.granted_tokens, std::memory_order_relaxed);
  store_ = nullptr;
}

void AsyncReservation::settle(int64_t used_tokens) {
  if (!store_) return;
  if (holds()) store_->held_tokens_.fetch_sub(take_.granted_tokens, std::memory_order_relaxed);
  AsyncPoolStore* store = store_;
  store_ = nullptr;
  if (source_ == ReservationSource::kRefused) return;
  if (take_.granted_tokens == 0) return;  // refused: nothing held, nothing was served
  store->settle(*this, used_tokens);
}

void AsyncMemoryStore::reserve(const policy::PoolSpec& spec, int64_t want_tokens,
                               int64_t min_tokens, ReserveDone done) {
  policy::PoolTake take = pools_.take(spec, want_tokens, min_tokens);
  loop_.post([this, alive = std::weak_ptr<char>(alive_), pools = &pools_, spec, take,
              done = std::move(done)]() mutable {
    if (alive.expired()) {  // the store went first (shutdown): the pools outlive it
      if (take.granted_tokens > 0) pools->refund(spec, take.granted_tokens);
      return;
    }
    done(AsyncReservation(this, spec, take, "", ReservationSource::kLocal));
  });
}

void AsyncMemoryStore::settle(const AsyncReservation& r, int64_t used_tokens) {
  pools_.refund(r.spec(), r.tokens() - std::max<int64_t>(0, used_tokens));
}

}  // namespace cutline::gateway
