// Fuzz target for the budget arithmetic of admission (budget.h, token_pool.h): the bytes are a
// sequence of requests — arbitrary max output tokens, choices (n, best_of), min output tokens,
// pools and clamp/reject — reserved from an in-memory store and settled with arbitrary usage.
// Whatever the numbers, the pools must keep their invariants:
//   - a grant is positive, never above the pool's capacity, and covers every choice at the
//     per-choice limit the decision was lowered to;
//   - while no request used more than it reserved, no pool goes below zero, and every pool
//     holds exactly its capacity less what is reserved and what was used (the clock does not
//     move): a settle returns exactly what was taken and not used;
//   - whatever is reported used, a pool stays within [-capacity, capacity];
//   - the store's held tokens are the sum of the live reservations.
// A broken invariant aborts (the replay build has NDEBUG, so no assert()).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/policy/budget.h"

namespace {

using namespace cutline::policy;

struct Reader {
  const uint8_t* data;
  size_t size;
  bool more() const { return size > 0; }
  uint64_t u64() {
    uint64_t v = 0;
    const size_t n = size < sizeof v ? size : sizeof v;
    std::memcpy(&v, data, n);
    data += n;
    size -= n;
    return v;
  }
  uint8_t u8() {
    if (size == 0) return 0;
    --size;
    return *data++;
  }
};

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "budget invariant broken: %s\n", what);
  std::abort();
}

// Interesting magnitudes more often than uniform 64-bit noise would give them.
int64_t number(Reader& r) {
  const uint8_t shape = r.u8();
  const uint64_t raw = r.u64();
  switch (shape % 4) {
    case 0:
      return static_cast<int64_t>(raw % 2000);  // small, near the pools' sizes
    case 1:
      return static_cast<int64_t>(uint64_t{1} << (raw % 64));  // powers of two, 2^63 included
    case 2:
      return -static_cast<int64_t>(raw % 1000);
    default:
      return static_cast<int64_t>(raw);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in{data, size};
  cutline::base::ManualClock clock;
  MemoryPoolStore store(clock);
  const int64_t tenant_cap = 1 + static_cast<int64_t>(in.u64() % (int64_t{1} << 40));
  const int64_t global_cap = 1 + static_cast<int64_t>(in.u64() % (int64_t{1} << 40));
  const PoolRef tenant{"tenant/r/t", tenant_cap, Source{SourceKind::kTenantPool, "tenant"}};
  const PoolRef global{"global/r", global_cap, Source{SourceKind::kGlobalPool, "global"}};
  const PoolSpec tenant_spec{tenant.key, tenant_cap};
  const PoolSpec global_spec{global.key, global_cap};

  std::vector<PoolGrant> live;
  int64_t used_tenant = 0, used_global = 0;  // what settles charged (exact while no overuse)
  bool overused = false;

  auto check_pools = [&] {
    int64_t held = 0, held_tenant = 0, held_global = 0;
    for (const PoolGrant& g : live) {
      held += g.tenant.tokens() + g.global.tokens();
      held_tenant += g.tenant.tokens();
      held_global += g.global.tokens();
    }
    check(store.held_tokens() == held, "held tokens are the live reservations");
    const int64_t t = store.available(tenant_spec);
    const int64_t gl = store.available(global_spec);
    check(t <= tenant_cap && gl <= global_cap, "a pool above its capacity");
    check(t >= -tenant_cap && gl >= -global_cap, "a pool below minus its capacity");
    if (!overused) {
      check(t >= 0 && gl >= 0, "a pool below zero without overuse");
      check(t == tenant_cap - held_tenant - used_tenant, "tenant pool bookkeeping");
      check(gl == global_cap - held_global - used_global, "global pool bookkeeping");
    }
  };

  while (in.more()) {
    const uint8_t op = in.u8();
    if (op % 4 != 0 || live.empty()) {  // a request
      Decision d;
      d.matched = true;
      const int64_t max = number(in);
      if (max > 0) d.max_output_tokens = TokenLimit{max, Source{SourceKind::kRuleClamp, "max"}};
      d.choices = number(in);
      d.min_output_tokens = number(in);
      const uint8_t flags = in.u8();
      if (flags & 1) d.tenant_pool = tenant;
      if (flags & 2) d.global_pool = global;
      d.on_pool_exhausted = (flags & 4) ? PoolExhausted::kClamp : PoolExhausted::kReject;
      PoolGrant g = reserve_budget(d, store);
      if (!g.admitted) {
        check(!g.tenant.active() && !g.global.active(), "a refusal holds tokens");
        check(g.retry_after_s >= 1 && g.retry_after_s <= 120, "retry after out of range");
      } else {
        const int64_t choices = d.choices < 1 ? 1 : d.choices;
        for (const Reservation* r : {&g.tenant, &g.global}) {
          if (!r->active()) continue;
          const int64_t cap = r == &g.tenant ? tenant_cap : global_cap;
          check(r->tokens() > 0 && r->tokens() <= cap, "a grant outside (0, capacity]");
          check(d.max_output_tokens.tokens && *d.max_output_tokens.tokens >= 1,
                "an admitted request without a limit");
          int64_t per_request = 0;
          check(!__builtin_mul_overflow(*d.max_output_tokens.tokens, choices, &per_request) &&
                    per_request <= r->tokens(),
                "the choices can use more than was reserved");
        }
        if (g.tenant.active() && g.global.active()) {
          check(g.tenant.tokens() == g.global.tokens(), "the two pools hold different amounts");
        }
        live.push_back(std::move(g));
      }
    } else {  // a finish
      const size_t i = static_cast<size_t>(in.u64() % live.size());
      PoolGrant& g = live[i];
      const int64_t reserved = g.tenant.active() ? g.tenant.tokens() : g.global.tokens();
      int64_t used = number(in);
      if (op & 8) {
        overused = overused || used > reserved;  // the upstream may report anything
      } else {
        used = used < 0 ? 0 : used % (reserved + 1);
      }
      if (!overused) {
        const int64_t charged = used < 0 ? 0 : used;
        if (g.tenant.active()) used_tenant += charged;
        if (g.global.active()) used_global += charged;
      }
      g.settle(used);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    check_pools();
  }
  live.clear();  // unsettled grants refund everything
  check(store.held_tokens() == 0, "tokens held after every grant ended");
  if (!overused) {
    check(store.available(tenant_spec) == tenant_cap - used_tenant, "tenant pool after the end");
    check(store.available(global_spec) == global_cap - used_global, "global pool after the end");
  }
  return 0;
}
