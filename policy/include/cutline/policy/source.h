#pragma once
// Where a number came from. Every value in a Policy remembers the YAML path and position it was
// written at (YamlRef), and every number in a Decision says which rule, adaptive step, pool or
// client input produced it (Source). The gateway copies Source::path into the stop record's
// `rule` field and the metric label `rule`; `cutline policy explain` prints both.

#include <cstdint>
#include <string>
#include <string_view>

namespace cutline::policy {

// A position in the policy file. `path` is the key path, e.g.
// "policies[0].budget.adaptive[0].max_output_tokens". line and column are 1-based; 0 means the
// value was not written in the file and is the documented default.
struct YamlRef {
  std::string path;
  int line = 0;
  int column = 0;

  bool is_default() const { return line == 0; }
};

// What set a number in a Decision.
enum class SourceKind : uint8_t {
  kNone,          // no limit applies
  kClient,        // the request body (max_tokens / max_completion_tokens)
  kClientHeader,  // the Cutline-Deadline-Ms request header
  kRule,          // a plain value of the matched rule (deadline, timeouts, admission, on_cut)
  kRuleClamp,     // the rule's budget.max_output_tokens
  kAdaptive,      // an adaptive step (budget.adaptive[k]) whose condition held
  kTenantPool,    // what remained in the tenant's token pool (clamp)
  kGlobalPool,    // what remained in the rule's global token pool (clamp)
};

// Stable snake_case names: "none", "client", "client_header", "rule", "rule_clamp", "adaptive",
// "tenant_pool", "global_pool".
std::string_view to_string(SourceKind kind);

struct Source {
  SourceKind kind = SourceKind::kNone;
  // For values from the file: the YAML path, pointing into the Policy snapshot the Decision was
  // made from (valid while that snapshot is held). For client values a fixed label:
  // "request.max_tokens" or "header Cutline-Deadline-Ms". Empty for kNone.
  std::string_view path;
  // 1-based YAML line of the value; 0 for client values, kNone and documented defaults.
  int line = 0;
};

}  // namespace cutline::policy
