#pragma once
// Human-readable renderings for `cutline policy check|explain` and the gateway's admin
// endpoint: every number is printed with the rule and YAML line that produced it, e.g.
//   max_output_tokens  256    adaptive  policies[0].budget.adaptive[0].max_output_tokens (line 22)

#include <string>

#include "cutline/policy/budget.h"
#include "cutline/policy/decision.h"
#include "cutline/policy/policy.h"

namespace cutline::policy {

// The Decision, one value per line with its source. `grant` (optional) adds the pool outcome
// of reserve_budget().
std::string explain(const Decision& decision, const PoolGrant* grant = nullptr);

// A summary of a loaded policy: listeners, upstreams, tenants (key labels only, never
// digests of plain keys), rules with their lines, admission groups, budget store.
std::string summarize(const Policy& policy);

}  // namespace cutline::policy
