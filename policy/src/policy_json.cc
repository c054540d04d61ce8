// JSON renderings of a Policy and a Decision (policy_json.h).
#include "cutline/policy/policy_json.h"

namespace cutline::policy {

namespace {

using base::JsonWriter;

void write_strings(JsonWriter& w, std::string_view key, const std::vector<std::string>& items) {
  w.key(key).begin_array();
  for (const auto& s : items) w.value(s);
  w.end_array();
}

void write_source(JsonWriter& w, const Source& s) {
  w.begin_object().field("kind", to_string(s.kind));
  if (!s.path.empty()) w.field("path", s.path);
  if (s.line > 0) w.field("line", s.line);
  w.end_object();
}

void write_limit(JsonWriter& w, std::string_view key, const std::optional<Limit>& limit) {
  w.key(key);
  if (limit) {
    w.value(limit->value);
  } else {
    w.null();
  }
}

void write_sourced(JsonWriter& w, std::string_view key, const std::optional<int64_t>& value,
                   const Source& source) {
  w.key(key).begin_object().key("value");
  if (value) {
    w.value(*value);
  } else {
    w.null();
  }
  w.key("source");
  write_source(w, source);
  w.end_object();
}

// upstreams[] and tenants[]: credentials by where they come from, never their values.
void write_upstreams_and_tenants(JsonWriter& w, const Policy& p) {
  w.key("upstreams").begin_array();
  for (const auto& u : p.upstreams) {
    w.begin_object().field("name", u.name).field("url", u.url);
    write_strings(w, "models", u.models);
    w.field("connect_timeout_ms", u.connect_timeout_ms)
        .field("response_head_timeout_ms", u.response_head_timeout_ms)
        .field("spawn", u.spawn.has_value());
    if (u.api_key) w.field("api_key", u.api_key->label);
    w.key("headers").begin_object();
    for (const auto& h : u.headers) w.field(h.name, h.value.label);
    w.end_object();
    w.end_object();
  }
  w.end_array();
  w.key("tenants").begin_array();
  for (const auto& t : p.tenants) {
    w.begin_object().field("name", t.name).key("api_keys").begin_array();
    for (const auto& k : t.api_keys) w.value(k.label);
    w.end_array().end_object();
  }
  w.end_array();
}

// One policies[] entry: its match, budget, timeouts, admission and on_cut.
void write_rule(JsonWriter& w, const Rule& r) {
  w.begin_object().field("name", r.name).field("line", r.ref.line);
  w.key("match").begin_object();
  write_strings(w, "tenants", r.match.tenants);
  write_strings(w, "models", r.match.models);
  write_strings(w, "routes", r.match.routes);
  w.key("headers").begin_object();
  for (const auto& h : r.match.headers) w.field(h.name, h.pattern);
  w.end_object().end_object();
  if (!r.upstream.empty()) w.field("upstream", r.upstream);
  w.field("forward_client_key", r.forward_client_key);
  w.key("budget").begin_object();
  write_limit(w, "max_output_tokens", r.budget.max_output_tokens);
  write_limit(w, "tenant_tokens_per_minute", r.budget.tenant_tokens_per_minute);
  write_limit(w, "global_tokens_per_minute", r.budget.global_tokens_per_minute);
  w.field("on_pool_exhausted",
          r.budget.on_pool_exhausted == PoolExhausted::kClamp ? "clamp" : "reject");
  w.field("min_output_tokens", r.budget.min_output_tokens.value);
  w.key("adaptive").begin_array();
  for (const auto& s : r.budget.adaptive) {
    w.begin_object()
        .field("queue_depth_gt", s.queue_depth_gt)
        .field("max_output_tokens", s.max_output_tokens.value)
        .end_object();
  }
  w.end_array().end_object();
  write_limit(w, "deadline_ms", r.deadline_ms);
  write_limit(w, "ttft_timeout_ms", r.ttft_timeout_ms);
  write_limit(w, "idle_timeout_ms", r.idle_timeout_ms);
  w.key("admission").begin_object().field("group", r.admission.group);
  write_limit(w, "max_concurrent", r.admission.max_concurrent);
  w.field("queue_depth", r.admission.queue_depth.value)
      .field("queue_timeout_ms", r.admission.queue_timeout_ms.value)
      .field("priority", to_string(r.admission.priority))
      .end_object();
  w.key("on_cut")
      .begin_object()
      .field("mode", to_string(r.on_cut.mode))
      .field("finish_reason", to_string(r.on_cut.finish_reason))
      .end_object();
  w.end_object();
}

}  // namespace

void write_policy_json(JsonWriter& w, const Policy& p) {
  w.begin_object().field("source_file", p.source_file);
  w.key("listen").begin_array();
  for (const auto& l : p.listen) {
    w.begin_object().field("address", l.address).field("tls", l.tls.has_value()).end_object();
  }
  w.end_array();
  w.key("admin");
  if (p.admin) {
    w.value(p.admin->address);
  } else {
    w.null();
  }
  write_upstreams_and_tenants(w, p);
  w.key("policies").begin_array();
  for (const auto& r : p.rules) write_rule(w, r);
  w.end_array();
  w.field("budget_store", p.budget_store.url.empty() ? std::string("memory") : p.budget_store.url);
  w.field("access_log", p.access_log.kind == AccessLogKind::kStdout ? std::string("stdout")
                        : p.access_log.kind == AccessLogKind::kOff  ? std::string("off")
                                                                    : p.access_log.path);
  w.key("limits")
      .begin_object()
      .field("max_body_bytes", p.limits.max_body_bytes)
      .field("max_header_bytes", p.limits.max_header_bytes)
      .end_object();
  w.field("passthrough", p.passthrough == PassthroughMode::kAllow ? "allow" : "deny");
  write_strings(w, "passthrough_operational", p.passthrough_operational);
  write_strings(w, "trusted_proxies", p.trusted_proxies);
  w.end_object();
}

void write_diagnostics_json(JsonWriter& w, const std::vector<Diagnostic>& errors) {
  w.begin_array();
  for (const Diagnostic& d : errors) {
    w.begin_object()
        .field("file", d.file)
        .field("line", d.line)
        .field("column", d.column)
        .field("path", d.path)
        .field("message", d.message)
        .end_object();
  }
  w.end_array();
}

void write_decision_json(JsonWriter& w, const Decision& d) {
  w.begin_object().field("matched", d.matched);
  if (!d.matched) {
    w.field("message", d.no_match_message).end_object();
    return;
  }
  w.field("policy", d.policy_name).field("rule_index", static_cast<int64_t>(d.rule_index));
  w.optional_field("requested_max_tokens", d.requested_max_tokens);
  write_sourced(w, "max_output_tokens", d.max_output_tokens.tokens, d.max_output_tokens.source);
  write_sourced(w, "deadline_ms", d.deadline.ms, d.deadline.source);
  write_sourced(w, "ttft_timeout_ms", d.ttft_timeout.ms, d.ttft_timeout.source);
  write_sourced(w, "idle_timeout_ms", d.idle_timeout.ms, d.idle_timeout.source);
  const AdmissionDecision& a = d.admission;
  w.key("admission")
      .begin_object()
      .field("group", a.group)
      .field("priority", to_string(a.priority));
  write_sourced(w, "max_concurrent", a.max_concurrent, a.max_concurrent_source);
  write_sourced(w, "queue_depth", a.queue_depth, a.queue_depth_source);
  write_sourced(w, "queue_timeout_ms", a.queue_timeout_ms, a.queue_timeout_source);
  w.end_object();
  w.key("on_cut")
      .begin_object()
      .field("mode", to_string(d.on_cut.mode))
      .field("finish_reason", to_string(d.on_cut.finish_reason))
      .end_object();
  w.key("live")
      .begin_object()
      .field("queue_depth", d.live.queue_depth)
      .field("in_flight", d.live.in_flight)
      .end_object();
  w.end_object();
}

}  // namespace cutline::policy
