// The admit phase's token-pool step (stream.h): the rule's tenant pool, then its global pool,
// each reserved through the worker's AsyncPoolStore. The store answers later (a Redis round
// trip, or the next loop turn for the in-process store), so nothing here waits: the stream stays
// in Phase::kAdmit, holding its admission slot, until the last pool answered, and then routes.
// A stream that ended meanwhile (deadline, client gone, shutdown) drops the answer, and the
// reservation it carries refunds itself. Under an observe-mode rule a refusal is noted as the
// would-cut it would have been and the request goes on. Kept apart from stream.cc: the request
// path's whole contact with the pools is reserve_pools() here and grant_.settle() in finish.
#include <algorithm>

#include "cutline/gateway/stream.h"
#include "cutline/gateway/worker.h"

namespace cutline::gateway {

void Stream::reserve_pools() {
  // Embeddings produce no output tokens: their input is what they cost.
  pool_want_ = route_ == Route::kEmbeddings
                   ? policy::input_budget_want(decision_, route_req_->input_tokens_estimate)
                   : policy::budget_want(decision_);
  if (pool_want_ == 0 || !worker_.pools) {
    route();
    return;
  }
  reserve_pool(/*tenant=*/decision_.tenant_pool.has_value());
}

void Stream::reserve_pool(bool tenant) {
  const policy::PoolRef& pool = tenant ? *decision_.tenant_pool : *decision_.global_pool;
  policy::PoolAsk ask = policy::pool_ask(decision_, pool, pool_want_);
  if (route_ == Route::kEmbeddings) ask.min_tokens = ask.want_tokens;  // an input is not clamped
  worker_.pools->reserve(ask.spec, ask.want_tokens, ask.min_tokens,
                         [weak = weak_from_this(), tenant, ask](AsyncReservation r) {
                           auto self = weak.lock();
                           // Ended meanwhile: `r` refunds what it holds as it goes.
                           if (!self || self->life_.phase() != Phase::kAdmit) return;
                           self->on_pool_reserved(tenant, ask, std::move(r));
                         });
}

void Stream::on_pool_reserved(bool tenant, const policy::PoolAsk& ask, AsyncReservation r) {
  const policy::PoolRef& pool = tenant ? *decision_.tenant_pool : *decision_.global_pool;
  if (r.source() == ReservationSource::kRefused && observe()) {
    note_would_cut(proto::Cause::kAdmissionRejected, "budget_store.on_error", 0, 0, "tokens");
    route();
    return;
  }
  if (r.source() == ReservationSource::kRefused) {
    // budget_store on_error: closed, and the shared store failed (counted by the store).
    Ending e;
    e.cause = proto::Cause::kAdmissionRejected;
    e.rule = "budget_store.on_error";
    e.message = "token pool store unavailable (on_error: closed)";
    e.error = make_error(ErrorKind::kExhausted, "token budget store unavailable (" +
                                                    std::string(pool.source.path) +
                                                    "; budget_store.on_error: closed)");
    e.retry_after_s = std::max<int64_t>(1, (r.take().retry_after_ms + 999) / 1000);
    finish(std::move(e));
    return;
  }
  if (r.tokens() <= 0) {
    policy::PoolGrant refused;
    policy::reject_pool_take(pool, ask, r.take(), refused);
    if (observe()) {  // what enforcing would have refused; the request goes on unclamped
      note_would_cut(proto::Cause::kAdmissionRejected, refused.rejected_by.path,
                     static_cast<double>(refused.needed_tokens),
                     static_cast<double>(refused.available_tokens), "tokens");
      route();
      return;
    }
    Ending e;
    e.cause = proto::Cause::kAdmissionRejected;
    e.rule = std::string(refused.rejected_by.path);
    e.limit = static_cast<double>(refused.needed_tokens);
    e.observed = static_cast<double>(refused.available_tokens);
    e.unit = "tokens";
    e.message = "token pool exhausted";
    e.error = make_error(ErrorKind::kRateLimited, "token budget exhausted (" + e.rule + ")");
    e.retry_after_s = refused.retry_after_s;
    finish(std::move(e));  // settles the tenant pool's reservation when the global one refused
    return;
  }
  policy::apply_pool_take(decision_, pool, r.tokens(), pool_want_);
  (tenant ? grant_.tenant : grant_.global) = std::move(r);
  if (tenant && decision_.global_pool) {
    reserve_pool(/*tenant=*/false);
    return;
  }
  route();
}

}  // namespace cutline::gateway
