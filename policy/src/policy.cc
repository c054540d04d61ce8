// Policy accessors and the small enum names (policy.h, source.h).
#include "cutline/policy/policy.h"

#include "cutline/policy/glob.h"

namespace cutline::policy {

std::string_view to_string(SourceKind kind) {
  switch (kind) {
    case SourceKind::kNone:
      return "none";
    case SourceKind::kClient:
      return "client";
    case SourceKind::kClientHeader:
      return "client_header";
    case SourceKind::kRule:
      return "rule";
    case SourceKind::kRuleClamp:
      return "rule_clamp";
    case SourceKind::kAdaptive:
      return "adaptive";
    case SourceKind::kTenantPool:
      return "tenant_pool";
    case SourceKind::kGlobalPool:
      return "global_pool";
  }
  return "none";
}

std::string_view to_string(Priority priority) {
  return priority == Priority::kBatch ? "batch" : "interactive";
}

std::string_view to_string(CutMode mode) {
  switch (mode) {
    case CutMode::kLabel:
      return "label";
    case CutMode::kError:
      return "error";
    case CutMode::kObserve:
      return "observe";
  }
  return "label";
}

std::string_view to_string(FinishReasonStyle style) {
  return style == FinishReasonStyle::kCause ? "cause" : "length";
}

std::string_view to_string(Balance balance) {
  switch (balance) {
    case Balance::kLeastRequest:
      return "least_request";
    case Balance::kLoadAware:
      return "load_aware";
    case Balance::kRoundRobin:
      return "round_robin";
  }
  return "least_request";
}

std::string_view to_string(LoadReportKind kind) {
  switch (kind) {
    case LoadReportKind::kNone:
      return "none";
    case LoadReportKind::kCutline:
      return "cutline";
    case LoadReportKind::kVllm:
      return "vllm";
    case LoadReportKind::kAuto:
      return "auto";
  }
  return "none";
}

namespace {
bool all_star(const std::vector<std::string>& globs) {
  for (const auto& g : globs) {
    if (g == "*") return true;
  }
  return false;
}
}  // namespace

bool Match::catch_all() const {
  return all_star(tenants) && all_star(models) && all_star(routes) && headers.empty();
}

const Rule* Policy::find_rule(std::string_view name) const {
  for (const auto& r : rules) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

const Upstream* Policy::find_upstream(std::string_view name) const {
  for (const auto& u : upstreams) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

const Tenant* Policy::find_tenant(std::string_view name) const {
  for (const auto& t : tenants) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const Upstream* Policy::upstream_for_model(std::string_view model) const {
  for (const auto& u : upstreams) {
    for (const auto& g : u.models) {
      if (glob_match(g, model)) return &u;
    }
  }
  return nullptr;
}

const Upstream* Policy::route(const Rule& rule, std::string_view model) const {
  if (!rule.upstream.empty()) return find_upstream(rule.upstream);
  return upstream_for_model(model);
}

}  // namespace cutline::policy
