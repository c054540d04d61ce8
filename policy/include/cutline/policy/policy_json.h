#pragma once
// JSON renderings for the gateway's admin endpoints: the policy in force
// (/v1/cutline/policy) and a stream's Decision (/v1/cutline/streams, debug logs). Key digests
// are never written, only their labels ("sha256:1a2b3c4d...", "env:VARNAME").
//
// A source is written as {"kind": "adaptive", "path": "policies[0]...", "line": 22}; a value
// without a limit as null.

#include <vector>

#include "cutline/base/json_writer.h"
#include "cutline/policy/decision.h"
#include "cutline/policy/loader.h"
#include "cutline/policy/policy.h"

namespace cutline::policy {

void write_policy_json(base::JsonWriter& w, const Policy& policy);
void write_decision_json(base::JsonWriter& w, const Decision& decision);
// The loader's errors as an array of {file, line, column, path, message} (`cutline policy check
// --format json`); line and column are 0 when the error has no position.
void write_diagnostics_json(base::JsonWriter& w, const std::vector<Diagnostic>& errors);

}  // namespace cutline::policy
