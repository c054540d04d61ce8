// match_rule() and decide(): first matching rule, then each number with its source
// (decision.h).
#include "cutline/policy/decision.h"

#include "cutline/policy/glob.h"

namespace cutline::policy {

namespace {

constexpr std::string_view kClientMaxTokensPath = "request.max_tokens";
constexpr std::string_view kClientDeadlinePath = "header Cutline-Deadline-Ms";

bool any_glob(const std::vector<std::string>& globs, std::string_view value) {
  for (const auto& g : globs) {
    if (glob_match(g, value)) return true;
  }
  return false;
}

bool matches(const Match& m, const RequestFacts& facts) {
  if (!any_glob(m.tenants, facts.tenant) || !any_glob(m.models, facts.model) ||
      !any_glob(m.routes, facts.route)) {
    return false;
  }
  for (const auto& h : m.headers) {
    if (!facts.header) return false;
    std::optional<std::string_view> value = facts.header(h.name);
    if (!value || !glob_match(h.pattern, *value)) return false;
  }
  return true;
}

Source from_ref(SourceKind kind, const YamlRef& ref) { return Source{kind, ref.path, ref.line}; }

}  // namespace

std::optional<size_t> match_rule(const Policy& policy, const RequestFacts& facts) {
  for (size_t i = 0; i < policy.rules.size(); ++i) {
    if (matches(policy.rules[i].match, facts)) return i;
  }
  return std::nullopt;
}

namespace {

TokenLimit max_output_tokens(const Rule& rule, const RequestFacts& facts, const LiveState& live) {
  // Max output tokens: the smallest wins; ties go to the earlier candidate (client, clamp,
  // adaptive steps in file order), so a tie with the client's own value stays the client's.
  TokenLimit tokens;
  auto consider = [&](int64_t value, Source source) {
    if (!tokens.tokens || value < *tokens.tokens) tokens = TokenLimit{value, source};
  };
  if (facts.client_max_tokens) {
    consider(*facts.client_max_tokens, Source{SourceKind::kClient, kClientMaxTokensPath, 0});
  }
  const Budget& b = rule.budget;
  if (b.max_output_tokens) {
    consider(b.max_output_tokens->value,
             from_ref(SourceKind::kRuleClamp, b.max_output_tokens->ref));
  }
  for (const auto& step : b.adaptive) {
    if (live.queue_depth > step.queue_depth_gt) {
      consider(step.max_output_tokens.value,
               from_ref(SourceKind::kAdaptive, step.max_output_tokens.ref));
    }
  }
  return tokens;
}

// The rule's admission group, priority and limits, each with its source.
AdmissionDecision admission_of(const Admission& a) {
  AdmissionDecision ad;
  ad.group = a.group;
  ad.group_index = a.group_index;
  ad.priority = a.priority;
  ad.priority_source = from_ref(SourceKind::kRule, a.priority_ref);
  if (a.max_concurrent) {
    ad.max_concurrent = a.max_concurrent->value;
    ad.max_concurrent_source = from_ref(SourceKind::kRule, a.max_concurrent->ref);
  }
  ad.queue_depth = a.queue_depth.value;
  ad.queue_depth_source = from_ref(SourceKind::kRule, a.queue_depth.ref);
  ad.queue_timeout_ms = a.queue_timeout_ms.value;
  ad.queue_timeout_source = from_ref(SourceKind::kRule, a.queue_timeout_ms.ref);
  return ad;
}

}  // namespace

Decision decide(const Policy& policy, const RequestFacts& facts, const LiveState& live) {
  Decision d;
  d.live = live;
  d.requested_max_tokens = facts.client_max_tokens;
  d.choices = facts.choices > 1 ? facts.choices : 1;
  const std::optional<size_t> index = match_rule(policy, facts);
  if (!index) {
    d.no_match_message = "no policy matches this request (tenant \"" + std::string(facts.tenant) +
                         "\", model \"" + std::string(facts.model) + "\", route \"" +
                         std::string(facts.route) + "\")";
    return d;
  }
  const Rule& rule = policy.rules[*index];
  d.matched = true;
  d.rule = &rule;
  d.policy_name = rule.name;
  d.rule_index = *index;

  d.max_output_tokens = max_output_tokens(rule, facts, live);
  const Budget& b = rule.budget;

  if (b.tenant_tokens_per_minute) {
    d.tenant_pool = PoolRef{"tenant/" + rule.name + "/" + std::string(facts.tenant),
                            b.tenant_tokens_per_minute->value,
                            from_ref(SourceKind::kTenantPool, b.tenant_tokens_per_minute->ref)};
  }
  if (b.global_tokens_per_minute) {
    d.global_pool = PoolRef{"global/" + rule.name, b.global_tokens_per_minute->value,
                            from_ref(SourceKind::kGlobalPool, b.global_tokens_per_minute->ref)};
  }
  d.on_pool_exhausted = b.on_pool_exhausted;
  d.min_output_tokens = b.min_output_tokens.value;

  auto time_limit = [](const std::optional<Limit>& limit) {
    return limit ? TimeLimit{limit->value, from_ref(SourceKind::kRule, limit->ref)} : TimeLimit{};
  };
  d.deadline = time_limit(rule.deadline_ms);
  if (facts.client_deadline_ms && (!d.deadline.ms || *facts.client_deadline_ms < *d.deadline.ms)) {
    d.deadline = TimeLimit{*facts.client_deadline_ms,
                           Source{SourceKind::kClientHeader, kClientDeadlinePath, 0}};
  }
  d.ttft_timeout = time_limit(rule.ttft_timeout_ms);
  d.idle_timeout = time_limit(rule.idle_timeout_ms);

  d.admission = admission_of(rule.admission);

  d.on_cut = CutPresentation{rule.on_cut.mode, rule.on_cut.finish_reason,
                             from_ref(SourceKind::kRule, rule.on_cut.ref)};
  d.upstream = rule.upstream;
  return d;
}

}  // namespace cutline::policy
