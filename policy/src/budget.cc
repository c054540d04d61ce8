// reserve_budget(): the pool step of admission (budget.h).
#include "cutline/policy/budget.h"

#include <algorithm>
#include <cstdint>

namespace cutline::policy {

namespace {

// a * b for the non-negative numbers of a reservation, saturating at INT64_MAX instead of
// wrapping: a request asking for more than any pool holds is then refused (or clamped), never
// turned into a small or negative reservation.
int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return INT64_MAX;
  return out;
}

// Reserves from one pool; on success lowers `want` (tokens for all choices) to what was granted,
// and the per-choice limit with it.
bool take_from(PoolStore& store, const PoolRef& pool, Decision& d, int64_t& want, Reservation& out,
               PoolGrant& grant) {
  PoolAsk ask = pool_ask(d, pool, want);
  PoolTake t = store.take(ask.spec, ask.want_tokens, ask.min_tokens);
  if (t.granted_tokens <= 0) {
    reject_pool_take(pool, ask, t, grant);
    return false;
  }
  apply_pool_take(d, pool, t.granted_tokens, want);
  out = Reservation(&store, std::move(ask.spec), t.granted_tokens);
  return true;
}

}  // namespace

int64_t budget_want(const Decision& decision) {
  if (!decision.matched || (!decision.tenant_pool && !decision.global_pool)) return 0;
  // The loader guarantees a rule with pools has a max_output_tokens clamp.
  if (!decision.max_output_tokens.tokens) return 0;
  // Every choice (n, best_of) may use the whole limit: reserve for all of them.
  return saturating_mul(std::max<int64_t>(1, *decision.max_output_tokens.tokens),
                        std::max<int64_t>(1, decision.choices));
}

int64_t input_budget_want(const Decision& decision, int64_t input_tokens) {
  if (!decision.matched || (!decision.tenant_pool && !decision.global_pool)) return 0;
  return std::max<int64_t>(1, input_tokens);
}

PoolAsk pool_ask(const Decision& d, const PoolRef& pool, int64_t want) {
  const bool clamp = d.on_pool_exhausted == PoolExhausted::kClamp;
  const int64_t choices = std::max<int64_t>(1, d.choices);
  PoolAsk ask;
  ask.spec = PoolSpec{pool.key, pool.tokens_per_minute};
  ask.want_tokens = want;
  const int64_t min_per_choice = std::max<int64_t>(1, d.min_output_tokens);
  ask.min_tokens = clamp ? std::min(saturating_mul(min_per_choice, choices), want) : want;
  return ask;
}

void apply_pool_take(Decision& d, const PoolRef& pool, int64_t granted, int64_t& want) {
  if (granted >= want) return;
  // Whole tokens per choice; what does not divide evenly goes back at settle.
  const int64_t choices = std::max<int64_t>(1, d.choices);
  want = granted;
  d.max_output_tokens = TokenLimit{std::max<int64_t>(1, want / choices), pool.source};
}

void reject_pool_take(const PoolRef& pool, const PoolAsk& ask, const PoolTake& take,
                      PoolGrant& grant) {
  grant.admitted = false;
  grant.rejected_by = pool.source;
  grant.needed_tokens = ask.min_tokens;
  grant.available_tokens = take.available_tokens;
  grant.retry_after_s = std::max<int64_t>(1, (take.retry_after_ms + 999) / 1000);
}

PoolGrant reserve_budget(Decision& decision, PoolStore& store) {
  PoolGrant grant;
  int64_t want = budget_want(decision);
  if (want == 0) return grant;
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
