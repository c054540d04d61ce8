#pragma once
// `cutline policy diff OLD NEW`: what a policy change means for the requests it governs, in the
// words `cutline policy explain` uses (max_output_tokens, deadline, ttft_timeout, ...). Rules
// are paired by name; for each rule the report says whom it applies to (tenants, models, routes,
// headers) and every value that changes, with the YAML path and line of the new value:
//
//   policy "default"  (policies[0], line 14)  tenants *  models *  routes *
//     deadline             30s -> 20s         policies[0].deadline (line 17)
//     on_cut               observe/length -> label/length   policies[0].on_cut (line 19)
//
// then rules added and removed, a change of first-match order, and tenants and upstreams added
// or removed. Equal policies give "no changes".

#include <string>

#include "cutline/policy/policy.h"

namespace cutline::policy {

// The report; `changed` (optional) is set to whether anything differs.
std::string diff(const Policy& before, const Policy& after, bool* changed = nullptr);

}  // namespace cutline::policy
