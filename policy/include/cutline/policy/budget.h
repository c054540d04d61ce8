#pragma once
// reserve_budget(): the pool step of admission. After decide() and before the request goes
// upstream, the gateway reserves the Decision's max output tokens from the tenant pool and the
// global pool of the matched rule. When a pool cannot cover it, the rule's on_pool_exhausted
// says what happens:
//   clamp  -> max_output_tokens is lowered to what remains (Decision::max_output_tokens.source
//             becomes kTenantPool / kGlobalPool; a stop there is labeled gateway_budget), unless
//             less than budget.min_output_tokens remains, which rejects;
//   reject -> nothing is reserved; the gateway answers 429 admission_rejected with
//             `Retry-After: retry_after_s` (from the pool's refill rate).
// The PoolGrant holds the reservations for the stream's life; call settle(output_tokens) at
// finish. Destroying it unsettled refunds everything (cancel before any output).

#include <cstdint>

#include "cutline/policy/decision.h"
#include "cutline/policy/token_pool.h"

namespace cutline::policy {

struct PoolGrant {
  bool admitted = true;

  // When admitted (empty reservations when the rule has no pools).
  Reservation tenant;
  Reservation global;

  // When rejected.
  Source rejected_by;            // the pool that could not cover the request
  int64_t needed_tokens = 0;     // what the request needed (min_output_tokens under clamp)
  int64_t available_tokens = 0;  // what that pool held
  int64_t retry_after_s = 0;     // whole seconds, >= 1

  // Settles both reservations with the request's output tokens. Idempotent.
  void settle(int64_t output_tokens) {
    tenant.settle(output_tokens);
    global.settle(output_tokens);
  }
};

// Reserves decision.max_output_tokens from decision.tenant_pool and decision.global_pool (when
// present) and lowers decision.max_output_tokens when a pool clamps it. Requires
// decision.matched. Thread-safe when `store` is.
PoolGrant reserve_budget(Decision& decision, PoolStore& store);

// The steps of reserve_budget, for a caller whose store answers later (the gateway's
// asynchronous stores): budget_want() once, then for the tenant pool and then the global pool
// pool_ask() -> the store's take -> apply_pool_take() (or reject_pool_take() when nothing was
// granted).

// Tokens to reserve for every choice; 0 when the decision reserves from no pool.
int64_t budget_want(const Decision& decision);
// An input-only request (/v1/embeddings: no output tokens) reserves its estimated input tokens
// instead, all or nothing (an input cannot be clamped; ask with min_tokens == want_tokens) and
// settles with the input tokens the upstream counted. 0 when the decision reserves from no pool.
int64_t input_budget_want(const Decision& decision, int64_t input_tokens);
// What to ask `pool` for, given the tokens still wanted.
struct PoolAsk {
  PoolSpec spec;
  int64_t want_tokens = 0;
  int64_t min_tokens = 0;  // == want_tokens unless the rule clamps
};
PoolAsk pool_ask(const Decision& decision, const PoolRef& pool, int64_t want);
// A take granted `granted` (> 0) tokens: lowers `want` to it, and decision.max_output_tokens with
// it (source: the pool) when the pool clamped.
void apply_pool_take(Decision& decision, const PoolRef& pool, int64_t granted, int64_t& want);
// A take granted nothing: fills grant's rejection fields (admitted false).
void reject_pool_take(const PoolRef& pool, const PoolAsk& ask, const PoolTake& take,
                      PoolGrant& grant);

}  // namespace cutline::policy
