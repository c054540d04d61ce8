// Text renderings of a Decision and of a Policy for the CLI and the admin endpoint (explain.h).
#include "cutline/policy/explain.h"

#include <cstdio>

#include "cutline/policy/duration.h"

namespace cutline::policy {

namespace {

std::string where(const Source& s) {
  switch (s.kind) {
    case SourceKind::kNone:
      return "no limit set";
    case SourceKind::kClient:
    case SourceKind::kClientHeader:
      return "client       " + std::string(s.path);
    default:
      break;
  }
  char kind[24];
  std::snprintf(kind, sizeof kind, "%-12s ", std::string(to_string(s.kind)).c_str());
  std::string out = kind + std::string(s.path);
  out += s.line > 0 ? " (line " + std::to_string(s.line) + ")" : " (default)";
  return out;
}

void row(std::string& out, std::string_view name, const std::string& value, const Source& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "  %-20s %-12s ", std::string(name).c_str(), value.c_str());
  out += buf;
  out += where(s);
  out += '\n';
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ",";
    out += items[i];
  }
  return out;
}

std::string opt_ms(const std::optional<int64_t>& ms) {
  return ms ? format_duration_ms(*ms) : std::string("-");
}

}  // namespace

std::string explain(const Decision& d, const PoolGrant* grant) {
  std::string out;
  if (!d.matched) {
    out += "no policy matched: " + d.no_match_message + "\n";
    out +=
        "  the gateway answers 404 (model_not_found, as for a model that does not exist; 403 "
        "when a rule serves the model to this tenant on another route); add a catch-all rule to "
        "serve it\n";
    return out;
  }
  out += "policy \"" + std::string(d.policy_name) + "\"  (" + d.rule->ref.path + ", line " +
         std::to_string(d.rule->ref.line) + ", first match wins)\n";
  out += "live state: queue_depth " + std::to_string(d.live.queue_depth) + ", in_flight " +
         std::to_string(d.live.in_flight) + "\n";
  out += "requested max_tokens: " +
         (d.requested_max_tokens ? std::to_string(*d.requested_max_tokens) : std::string("none")) +
         "\n";
  row(out, "max_output_tokens",
      d.max_output_tokens.tokens ? std::to_string(*d.max_output_tokens.tokens) : "unlimited",
      d.max_output_tokens.source);
  if (d.tenant_pool) {
    row(out, "tenant_pool", std::to_string(d.tenant_pool->tokens_per_minute) + "/min",
        d.tenant_pool->source);
  }
  if (d.global_pool) {
    row(out, "global_pool", std::to_string(d.global_pool->tokens_per_minute) + "/min",
        d.global_pool->source);
  }
  if (d.tenant_pool || d.global_pool) {
    const Rule& r = *d.rule;
    row(out, "on_pool_exhausted", d.on_pool_exhausted == PoolExhausted::kClamp ? "clamp" : "reject",
        Source{SourceKind::kRule, r.budget.on_pool_exhausted_ref.path,
               r.budget.on_pool_exhausted_ref.line});
  }
  row(out, "deadline", opt_ms(d.deadline.ms), d.deadline.source);
  row(out, "ttft_timeout", opt_ms(d.ttft_timeout.ms), d.ttft_timeout.source);
  row(out, "idle_timeout", opt_ms(d.idle_timeout.ms), d.idle_timeout.source);
  const AdmissionDecision& a = d.admission;
  out += "admission group \"" + std::string(a.group) + "\"\n";
  row(out, "priority", std::string(to_string(a.priority)), a.priority_source);
  row(out, "max_concurrent", a.max_concurrent ? std::to_string(*a.max_concurrent) : "unlimited",
      a.max_concurrent_source);
  row(out, "queue_depth", std::to_string(a.queue_depth), a.queue_depth_source);
  row(out, "queue_timeout", format_duration_ms(a.queue_timeout_ms), a.queue_timeout_source);
  row(out, "on_cut",
      std::string(to_string(d.on_cut.mode)) + "/" + std::string(to_string(d.on_cut.finish_reason)),
      d.on_cut.source);
  if (d.on_cut.observe()) {
    out +=
        "  observe mode: none of the rule's limits above is enforced; the cuts they would make "
        "are recorded (would_cut)\n";
  }
  if (!d.upstream.empty()) {
    row(out, "upstream", std::string(d.upstream),
        Source{SourceKind::kRule, d.rule->upstream_ref.path, d.rule->upstream_ref.line});
  }
  if (grant) {
    if (grant->admitted) {
      out += "pools: admitted";
      if (grant->tenant.active()) {
        out += ", tenant pool reserved " + std::to_string(grant->tenant.tokens());
      }
      if (grant->global.active()) {
        out += ", global pool reserved " + std::to_string(grant->global.tokens());
      }
      out += "\n";
    } else {
      out += "pools: rejected (429 admission_rejected, Retry-After " +
             std::to_string(grant->retry_after_s) + "): needs " +
             std::to_string(grant->needed_tokens) + ", " + std::to_string(grant->available_tokens) +
             " available; " + where(grant->rejected_by) + "\n";
    }
  }
  return out;
}

std::string summarize(const Policy& p) {
  std::string out = "policy file " + p.source_file + ": OK\n";
  out += "listeners (" + std::to_string(p.listen.size()) + "):\n";
  for (const auto& l : p.listen) {
    out += "  " + l.address + (l.tls ? "  tls" : "") + "\n";
  }
  out += "admin: " + (p.admin ? p.admin->address : std::string("none")) + "\n";
  out += "upstreams (" + std::to_string(p.upstreams.size()) + "):\n";
  for (const auto& u : p.upstreams) {
    out += "  " + u.name + "  " + u.url + "  models " + join(u.models);
    if (u.spawn) out += "  spawn " + u.spawn->command[0];
    out += "\n";
  }
  out += "tenants (" + std::to_string(p.tenants.size()) + ")" +
         (p.tenants.empty() ? ": none, no authentication\n" : ":\n");
  for (const auto& t : p.tenants) {
    out += "  " + t.name + "  keys:";
    for (const auto& k : t.api_keys) out += " " + k.label;
    out += "\n";
  }
  out += "rules (" + std::to_string(p.rules.size()) + ", first match wins):\n";
  for (const auto& r : p.rules) {
    out += "  [" + std::to_string(r.index) + "] " + r.name + "  (line " +
           std::to_string(r.ref.line) + ")  tenants " + join(r.match.tenants) + "  models " +
           join(r.match.models) + "  routes " + join(r.match.routes);
    for (const auto& h : r.match.headers) out += "  " + h.name + "=" + h.pattern;
    out += "\n      ";
    const Budget& b = r.budget;
    out += "max_output_tokens " +
           (b.max_output_tokens ? std::to_string(b.max_output_tokens->value) : std::string("-"));
    if (b.tenant_tokens_per_minute) {
      out += ", tenant " + std::to_string(b.tenant_tokens_per_minute->value) + "/min";
    }
    if (b.global_tokens_per_minute) {
      out += ", global " + std::to_string(b.global_tokens_per_minute->value) + "/min";
    }
    for (const auto& s : b.adaptive) {
      out += ", queue_depth>" + std::to_string(s.queue_depth_gt) + " -> " +
             std::to_string(s.max_output_tokens.value);
    }
    out += "\n      deadline " +
           opt_ms(r.deadline_ms ? std::optional<int64_t>(r.deadline_ms->value) : std::nullopt) +
           ", ttft " +
           opt_ms(r.ttft_timeout_ms ? std::optional<int64_t>(r.ttft_timeout_ms->value)
                                    : std::nullopt) +
           ", idle " +
           opt_ms(r.idle_timeout_ms ? std::optional<int64_t>(r.idle_timeout_ms->value)
                                    : std::nullopt) +
           "; admission " + r.admission.group + "/" + std::string(to_string(r.admission.priority)) +
           "; on_cut " + std::string(to_string(r.on_cut.mode)) + "/" +
           std::string(to_string(r.on_cut.finish_reason)) + "\n";
  }
  out += "admission groups (" + std::to_string(p.admission_groups.size()) + "):\n";
  for (const auto& g : p.admission_groups) {
    out += "  " + g.name + "  max_concurrent " +
           (g.max_concurrent ? std::to_string(*g.max_concurrent) : std::string("unlimited")) +
           ", queue_depth " + std::to_string(g.queue_depth) + "\n";
  }
  out +=
      "budget_store: " + (p.budget_store.url.empty() ? std::string("memory") : p.budget_store.url) +
      "\n";
  out += "access_log: " +
         std::string(p.access_log.kind == AccessLogKind::kStdout ? "stdout"
                     : p.access_log.kind == AccessLogKind::kOff  ? "off"
                                                                 : p.access_log.path) +
         "\n";
  out += "limits: max_body_bytes " + std::to_string(p.limits.max_body_bytes) +
         ", max_header_bytes " + std::to_string(p.limits.max_header_bytes) + "\n";
  return out;
}

}  // namespace cutline::policy
