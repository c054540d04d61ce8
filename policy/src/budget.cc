// reserve_budget(): the pool step of admission (budget.h).
#include "cutline/policy/budget.h"

#include <algorithm>

namespace cutline::policy {

namespace {

// Reserves from one pool; on success lowers `want` (tokens for all choices) to what was granted,
// and the per-choice limit with it.
bool take_from(PoolStore& store, const PoolRef& pool, Decision& d, int64_t& want, Reservation& out,
               PoolGrant& grant) {
  const bool clamp = d.on_pool_exhausted == PoolExhausted::kClamp;
  const int64_t choices = std::max<int64_t>(1, d.choices);
  const int64_t min_tokens = clamp ? std::min(d.min_output_tokens * choices, want) : want;
  PoolSpec spec{pool.key, pool.tokens_per_minute};
  PoolTake t = store.take(spec, want, min_tokens);
  if (t.granted_tokens <= 0) {
    grant.admitted = false;
    grant.rejected_by = pool.source;
    grant.needed_tokens = min_tokens;
    grant.available_tokens = t.available_tokens;
    grant.retry_after_s = std::max<int64_t>(1, (t.retry_after_ms + 999) / 1000);
    return false;
  }
  if (t.granted_tokens < want) {
    // Whole tokens per choice; what does not divide evenly goes back at settle.
    want = t.granted_tokens;
    d.max_output_tokens = TokenLimit{std::max<int64_t>(1, want / choices), pool.source};
  }
  out = Reservation(&store, std::move(spec), t.granted_tokens);
  return true;
}

}  // namespace

PoolGrant reserve_budget(Decision& decision, PoolStore& store) {
  PoolGrant grant;
  if (!decision.matched || (!decision.tenant_pool && !decision.global_pool)) return grant;
  // The loader guarantees a rule with pools has a max_output_tokens clamp.
  if (!decision.max_output_tokens.tokens) return grant;
  // Every choice (n, best_of) may use the whole limit: reserve for all of them.
  int64_t want = *decision.max_output_tokens.tokens * std::max<int64_t>(1, decision.choices);
  if (decision.tenant_pool &&
      !take_from(store, *decision.tenant_pool, decision, want, grant.tenant, grant)) {
    return grant;
  }
  if (decision.global_pool) {
    const int64_t before = want;
    if (!take_from(store, *decision.global_pool, decision, want, grant.global, grant)) {
      grant.tenant.settle(0);  // give the tenant pool back its share
      grant.tenant = Reservation();
      return grant;
    }
    // The global pool clamped further: return the difference to the tenant pool.
    if (want < before) grant.tenant.shrink_to(want);
  }
  return grant;
}

}  // namespace cutline::policy
