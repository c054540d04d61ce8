// Loader section `policies`: the rules, then the checks across rules — admission groups,
// references to tenants and upstreams, and rules that can never match because an earlier rule
// matches everything they would (load_sections.h).
#include <algorithm>
#include <cctype>
#include <map>

#include "cutline/policy/glob.h"
#include "load_sections.h"
#include "rule_warnings.h"

namespace cutline::policy::detail {

namespace {

constexpr int64_t kDefaultQueueTimeoutMs = 30000;

std::string line_of(const YamlRef& ref) { return "line " + std::to_string(ref.line); }

bool token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
         c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
         c == '+' || c == '^' || c == '`' || c == '|' || c == '~';
}

// A tenant glob that matches no tenant a request can carry (rule_warnings.h) never matches.
void warn_unmatched_tenant_glob(YamlReader& r, const YAML::Node& item, const std::string& path,
                                const std::string& glob, const Policy& p) {
  for (const std::string& tenant : tenant_universe(p)) {
    if (glob_match(glob, tenant)) return;
  }
  r.warn(item, path,
         p.tenants.empty() ? "no tenants are configured (requests carry no tenant), so " +
                                 quote(glob) + " never matches"
                           : quote(glob) +
                                 " matches no configured tenant, so it never matches (a request "
                                 "without a configured tenant's key gets 401 first)");
}

std::optional<Limit> read_limit(YamlReader& r, const Fields& f, std::string_view key,
                                const std::string& path, int64_t min) {
  const Entry* e = f.get(key);
  if (!e) return std::nullopt;
  const std::string kp = key_path(path, key);
  auto v = r.integer(e->value, kp, min);
  if (!v) return std::nullopt;
  return Limit{*v, r.ref(e->value, kp)};
}

std::optional<Limit> read_duration(YamlReader& r, const Fields& f, std::string_view key,
                                   const std::string& path) {
  const Entry* e = f.get(key);
  if (!e) return std::nullopt;
  const std::string kp = key_path(path, key);
  auto v = r.duration(e->value, kp);
  if (!v) return std::nullopt;
  return Limit{*v, r.ref(e->value, kp)};
}

// match.tenants: a name must be a configured tenant, a glob must match one.
void load_match_tenants(YamlReader& r, const Entry& e, const std::string& tp,
                        const References& refs, const Policy& p, Rule& rule) {
  auto l = r.string_list(e.value, tp);
  if (!l) return;
  rule.match.tenants = *l;
  for (size_t i = 0; i < l->size(); ++i) {
    const std::string& t = (*l)[i];
    if (!refs.tenants_ok) continue;
    const YAML::Node item = e.value[i];
    if (is_glob(t)) {
      warn_unmatched_tenant_glob(r, item, index_path(tp, i), t, p);
    } else if (p.tenants.empty()) {
      r.error(item, index_path(tp, i),
              "no tenants are configured (requests carry no tenant), so " + quote(t) +
                  " never matches");
    } else if (!p.find_tenant(t)) {
      r.error(item, index_path(tp, i), "unknown tenant " + quote(t));
    }
  }
}

// match.routes: paths starting with '/' (or globs); the list is kept only when all are.
void load_match_routes(YamlReader& r, const Entry& e, const std::string& rp, Rule& rule) {
  auto l = r.string_list(e.value, rp);
  if (!l) return;
  bool ok = true;
  for (size_t i = 0; i < l->size(); ++i) {
    const std::string& route = (*l)[i];
    if (route[0] != '/' && route[0] != '*') {
      r.error(e.value[i], index_path(rp, i),
              "a route is a path starting with '/' (or a glob), got " + quote(route));
      ok = false;
    } else if (auto w = route_warning(route)) {
      r.warn(e.value[i], index_path(rp, i), std::move(*w));
    }
  }
  if (ok) rule.match.routes = *l;
}

// match.headers: a map of HTTP token (matched case-insensitively) to glob.
void load_match_headers(YamlReader& r, const Entry& e, const std::string& hp, const Policy& p,
                        Rule& rule) {
  if (!e.value.IsMap()) {
    r.error(e.value, hp, "expected a map of header: glob, got " + std::string(describe(e.value)));
    return;
  }
  for (auto it = e.value.begin(); it != e.value.end(); ++it) {
    const YAML::Node k = it->first;
    const YAML::Node v = it->second;
    if (!k.IsScalar() || k.Scalar().empty() ||
        !std::all_of(k.Scalar().begin(), k.Scalar().end(), token_char)) {
      r.error(k, hp,
              "header names must be HTTP tokens, got " +
                  (k.IsScalar() ? quote(k.Scalar()) : std::string(describe(k))));
      continue;
    }
    std::string name = k.Scalar();
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto pattern = r.string(v, key_path(hp, name));
    if (!pattern) continue;
    bool dup = false;
    for (const auto& h : rule.match.headers) dup = dup || h.name == name;
    if (dup) {
      r.error(k, hp, "duplicate header " + quote(name) + " (names are case-insensitive)");
      continue;
    }
    rule.match.headers.push_back(HeaderMatch{name, *pattern});
  }
  // A header is whatever the client sends: with tenants configured, a rule it selects (a
  // class, a bigger budget) must say which tenants may select it, or anyone could.
  const bool any_tenant =
      std::any_of(rule.match.tenants.begin(), rule.match.tenants.end(),
                  [](const std::string& t) { return t.find('*') != std::string::npos; });
  if (!rule.match.headers.empty() && !p.tenants.empty() && any_tenant) {
    r.error(e.value, hp,
            "a rule selected by a request header must list the tenants allowed to select it "
            "(match.tenants without '*'): any client can send a header");
  }
}

void load_match(YamlReader& r, const YAML::Node& node, const std::string& path,
                const References& refs, const Policy& p, Rule& rule) {
  auto f = r.map(node, path, keys::kMatch);
  rule.match.ref = r.ref(node, path);
  if (!f) return;
  if (auto* e = f->get("tenants")) {
    load_match_tenants(r, *e, key_path(path, "tenants"), refs, p, rule);
  }
  if (auto* e = f->get("models")) {
    if (auto l = r.string_list(e->value, key_path(path, "models"))) rule.match.models = *l;
  }
  if (auto* e = f->get("routes")) load_match_routes(r, *e, key_path(path, "routes"), rule);
  if (auto* e = f->get("headers")) load_match_headers(r, *e, key_path(path, "headers"), p, rule);
}

// One budget.adaptive step; nullopt (with the errors reported) when it is incomplete.
std::optional<AdaptiveStep> load_adaptive_step(YamlReader& r, const YAML::Node& item,
                                               const std::string& sp) {
  auto sf = r.map(item, sp, keys::kAdaptiveStep);
  if (!sf) return std::nullopt;
  AdaptiveStep step;
  step.ref = r.ref(item, sp);
  bool ok = true;
  const Entry* when = sf->get("when");
  if (!when) {
    r.error(item, sp, "missing required key \"when\"");
    ok = false;
  } else {
    const std::string wp = key_path(sp, "when");
    auto wf = r.map(when->value, wp, keys::kAdaptiveWhen);
    if (!wf) {
      ok = false;
    } else if (auto* q = wf->get("queue_depth_gt")) {
      auto v = r.integer(q->value, key_path(wp, "queue_depth_gt"), 0);
      if (v)
        step.queue_depth_gt = *v;
      else
        ok = false;
    } else {
      // Only report a missing condition when the map had no (misspelled) keys at all;
      // a misspelling is already reported as an unknown key.
      if (when->value.IsMap() && when->value.size() == 0) {
        r.error(when->value, wp, "needs a condition: queue_depth_gt");
      }
      ok = false;
    }
  }
  auto m = read_limit(r, *sf, "max_output_tokens", sp, 1);
  if (!m) {
    if (!sf->get("max_output_tokens")) {
      r.error(item, sp, "missing required key \"max_output_tokens\"");
    }
    ok = false;
  }
  if (!ok) return std::nullopt;
  step.max_output_tokens = *m;
  return step;
}

// budget.adaptive: steps that lower max_output_tokens as the queue grows.
void load_adaptive(YamlReader& r, const YAML::Node& node, const std::string& ap, Budget& b) {
  auto items = r.list(node, ap);
  if (!items) return;
  for (size_t i = 0; i < items->size(); ++i) {
    auto step = load_adaptive_step(r, (*items)[i], index_path(ap, i));
    if (!step) continue;
    const Limit& m = step->max_output_tokens;
    if (b.max_output_tokens && m.value >= b.max_output_tokens->value) {
      r.error(m.ref, "never applies: " + std::to_string(m.value) +
                         " is not below budget.max_output_tokens (" +
                         std::to_string(b.max_output_tokens->value) + ", " +
                         line_of(b.max_output_tokens->ref) + ")");
    }
    b.adaptive.push_back(std::move(*step));
  }
}

// The checks across a budget's keys: token pools and min_output_tokens against the maximum.
void check_budget(YamlReader& r, const Budget& b, bool min_written) {
  // Pools reserve the request's maximum at admission, so that maximum must be bounded.
  for (const std::optional<Limit>* pool :
       {&b.tenant_tokens_per_minute, &b.global_tokens_per_minute}) {
    if (!*pool) continue;
    if (!b.max_output_tokens) {
      r.error((*pool)->ref,
              "a token pool needs budget.max_output_tokens: each request reserves its maximum "
              "output at admission");
    } else if (b.on_pool_exhausted == PoolExhausted::kReject &&
               (*pool)->value < b.max_output_tokens->value) {
      r.error((*pool)->ref, "is below budget.max_output_tokens (" +
                                std::to_string(b.max_output_tokens->value) +
                                "): with on_pool_exhausted: reject a full-size request could "
                                "never be admitted");
    }
  }
  if (min_written && b.on_pool_exhausted != PoolExhausted::kClamp) {
    r.error(b.min_output_tokens.ref, "applies only with on_pool_exhausted: clamp");
  } else if (min_written && b.max_output_tokens &&
             b.min_output_tokens.value > b.max_output_tokens->value) {
    r.error(b.min_output_tokens.ref, "is above budget.max_output_tokens (" +
                                         std::to_string(b.max_output_tokens->value) + ")");
  }
}

void load_budget(YamlReader& r, const YAML::Node& node, const std::string& path, Rule& rule) {
  auto f = r.map(node, path, keys::kBudget);
  if (!f) return;
  Budget& b = rule.budget;
  b.max_choices = read_limit(r, *f, "max_choices", path, 1);
  b.max_output_tokens = read_limit(r, *f, "max_output_tokens", path, 1);
  b.tenant_tokens_per_minute = read_limit(r, *f, "tenant_tokens_per_minute", path, 1);
  b.global_tokens_per_minute = read_limit(r, *f, "global_tokens_per_minute", path, 1);
  b.on_pool_exhausted_ref = YamlRef{key_path(path, "on_pool_exhausted"), 0, 0};
  if (auto* e = f->get("on_pool_exhausted")) {
    const std::string kp = key_path(path, "on_pool_exhausted");
    if (auto c = r.choice(e->value, kp, keys::kPoolExhausted)) {
      b.on_pool_exhausted = *c == 0 ? PoolExhausted::kReject : PoolExhausted::kClamp;
      b.on_pool_exhausted_ref = r.ref(e->value, kp);
    }
  }
  b.min_output_tokens = Limit{1, YamlRef{key_path(path, "min_output_tokens"), 0, 0}};
  const bool min_written = f->get("min_output_tokens") != nullptr;
  if (auto v = read_limit(r, *f, "min_output_tokens", path, 1)) b.min_output_tokens = *v;
  if (auto* e = f->get("adaptive")) load_adaptive(r, e->value, key_path(path, "adaptive"), b);
  check_budget(r, b, min_written);
}

void load_admission(YamlReader& r, const YAML::Node& node, const std::string& path, Rule& rule,
                    std::optional<Limit>& written_queue_depth) {
  auto f = r.map(node, path, keys::kAdmission);
  if (!f) return;
  Admission& a = rule.admission;
  a.max_concurrent = read_limit(r, *f, "max_concurrent", path, 1);
  written_queue_depth = read_limit(r, *f, "queue_depth", path, 0);
  if (auto d = read_duration(r, *f, "queue_timeout", path)) a.queue_timeout_ms = *d;
  if (auto* e = f->get("priority")) {
    const std::string kp = key_path(path, "priority");
    if (auto c = r.choice(e->value, kp, keys::kPriorities)) {
      a.priority = *c == 0 ? Priority::kInteractive : Priority::kBatch;
      a.priority_ref = r.ref(e->value, kp);
    }
  }
  if (auto* e = f->get("group")) {
    if (auto n = r.name(e->value, key_path(path, "group"))) a.group = *n;
  }
}

void load_on_cut(YamlReader& r, const YAML::Node& node, const std::string& path, Rule& rule) {
  auto f = r.map(node, path, keys::kOnCut);
  rule.on_cut.ref = r.ref(node, path);
  if (!f) return;
  if (auto* e = f->get("mode")) {
    if (auto c = r.choice(e->value, key_path(path, "mode"), keys::kCutModes)) {
      rule.on_cut.mode = *c == 0 ? CutMode::kLabel : *c == 1 ? CutMode::kError : CutMode::kObserve;
    }
  }
  if (auto* e = f->get("finish_reason")) {
    if (auto c = r.choice(e->value, key_path(path, "finish_reason"), keys::kFinishReasons)) {
      rule.on_cut.finish_reason = *c == 0 ? FinishReasonStyle::kLength : FinishReasonStyle::kCause;
    }
  }
}

// Whether every value `inner` lets through is let through by `outer` (one match list).
bool list_covers(const std::vector<std::string>& outer, const std::vector<std::string>& inner) {
  for (const auto& q : inner) {
    bool covered = false;
    for (const auto& pat : outer) {
      if (pat == "*" || pat == q || (!is_glob(q) && glob_match(pat, q))) {
        covered = true;
        break;
      }
    }
    if (!covered) return false;
  }
  return true;
}

// Whether rule `a` matches every request rule `b` matches (so b, after a, is unreachable).
bool covers(const Match& a, const Match& b) {
  if (!list_covers(a.tenants, b.tenants) || !list_covers(a.models, b.models) ||
      !list_covers(a.routes, b.routes)) {
    return false;
  }
  for (const auto& ha : a.headers) {
    bool implied = false;
    for (const auto& hb : b.headers) {
      if (hb.name == ha.name && (ha.pattern == "*" || ha.pattern == hb.pattern ||
                                 (!is_glob(hb.pattern) && glob_match(ha.pattern, hb.pattern)))) {
        implied = true;
      }
    }
    if (!implied) return false;
  }
  return true;
}

// One policies[i] entry as read, before admission groups are resolved.
struct LoadedRule {
  Rule rule;
  // Whether its match loaded cleanly (a broken match reads as "*" and would make the
  // unreachable check report noise).
  bool match_ok = false;
  std::optional<Limit> written_depth;  // admission.queue_depth as written
};

// policies[i].name: required, a valid name, and not an earlier rule's.
bool load_rule_name(YamlReader& r, const YAML::Node& item, const Fields& f, const std::string& path,
                    const Policy& p, Rule& rule) {
  const Entry* name = f.get("name");
  if (!name) {
    r.error(item, path, "missing required key \"name\"");
    return false;
  }
  auto n = r.name(name->value, key_path(path, "name"));
  if (!n) return false;
  rule.name = *n;
  if (const Rule* other = p.find_rule(rule.name)) {
    r.error(name->value, key_path(path, "name"),
            "duplicate policy name " + quote(rule.name) + " (first at " + other->ref.path + ", " +
                line_of(other->ref) + ")");
    return false;
  }
  return true;
}

// One policies[i] entry; nullopt when it is not a map or has no usable name (errors reported).
std::optional<LoadedRule> load_rule(YamlReader& r, const YAML::Node& item, const std::string& path,
                                    const References& refs, const Policy& p) {
  auto f = r.map(item, path, keys::kRule);
  if (!f) return std::nullopt;
  LoadedRule out;
  Rule& rule = out.rule;
  rule.index = p.rules.size();
  rule.ref = r.ref(item, path);
  if (!load_rule_name(r, item, *f, path, p, rule)) return std::nullopt;
  const size_t errors_before = r.error_count();
  if (auto* e = f->get("match")) {
    load_match(r, e->value, key_path(path, "match"), refs, p, rule);
  } else {
    rule.match.ref = YamlRef{key_path(path, "match"), 0, 0};
  }
  out.match_ok = r.error_count() == errors_before;
  if (auto* e = f->get("upstream")) {
    const std::string up = key_path(path, "upstream");
    if (auto u = r.name(e->value, up)) {
      rule.upstream = *u;
      rule.upstream_ref = r.ref(e->value, up);
      if (refs.upstreams_ok && !p.find_upstream(*u)) {
        r.error(e->value, up, "unknown upstream " + quote(*u));
      }
    }
  }
  if (auto* e = f->get("budget")) load_budget(r, e->value, key_path(path, "budget"), rule);
  if (auto* e = f->get("forward_client_key")) {
    if (auto b = r.boolean(e->value, key_path(path, "forward_client_key"))) {
      rule.forward_client_key = *b;
    }
  }
  rule.deadline_ms = read_duration(r, *f, "deadline", path);
  rule.ttft_timeout_ms = read_duration(r, *f, "ttft_timeout", path);
  rule.idle_timeout_ms = read_duration(r, *f, "idle_timeout", path);
  const std::string adm = key_path(path, "admission");
  rule.admission.queue_timeout_ms =
      Limit{kDefaultQueueTimeoutMs, YamlRef{key_path(adm, "queue_timeout"), 0, 0}};
  rule.admission.priority_ref = YamlRef{key_path(adm, "priority"), 0, 0};
  if (auto* e = f->get("admission")) load_admission(r, e->value, adm, rule, out.written_depth);
  if (rule.admission.group.empty()) rule.admission.group = rule.name;
  if (auto* e = f->get("on_cut")) {
    load_on_cut(r, e->value, key_path(path, "on_cut"), rule);
  } else {
    rule.on_cut.ref = YamlRef{key_path(path, "on_cut"), 0, 0};
  }
  return out;
}

// An error when an earlier rule with a clean match matches every request `rule` would; true
// when so.
bool report_unreachable(YamlReader& r, const YAML::Node& item, const std::string& path,
                        const Policy& p, const std::vector<bool>& match_ok, const Rule& rule) {
  for (size_t k = 0; k < p.rules.size(); ++k) {
    const Rule& earlier = p.rules[k];
    if (match_ok[k] && covers(earlier.match, rule.match)) {
      r.error(item, path,
              "unreachable: " + earlier.ref.path + " (" + quote(earlier.name) + ", " +
                  line_of(earlier.ref) + ") matches every request this rule would match");
      return true;
    }
  }
  return false;
}

// Admission groups: rules naming the same group share one queue. The first rule that writes
// a limit sets it for the group; a different value in another rule is an error.
void resolve_admission_groups(YamlReader& r, Policy& p,
                              const std::vector<std::optional<Limit>>& written_depth) {
  struct GroupDef {
    std::optional<Limit> max_concurrent;
    std::optional<Limit> queue_depth;
    size_t index;
  };
  std::map<std::string, GroupDef> groups;
  for (size_t i = 0; i < p.rules.size(); ++i) {
    Rule& rule = p.rules[i];
    auto [it, inserted] = groups.try_emplace(rule.admission.group, GroupDef{{}, {}, 0});
    GroupDef& g = it->second;
    if (inserted) {
      g.index = p.admission_groups.size();
      p.admission_groups.push_back(AdmissionGroup{rule.admission.group, std::nullopt, 0});
    }
    auto merge = [&](std::optional<Limit>& group_value, const std::optional<Limit>& written,
                     std::string_view what) {
      if (!written) return;
      if (!group_value) {
        group_value = written;
      } else if (group_value->value != written->value) {
        r.error(written->ref, "admission group " + quote(rule.admission.group) + " already has " +
                                  std::string(what) + " " + std::to_string(group_value->value) +
                                  " (" + group_value->ref.path + ", " + line_of(group_value->ref) +
                                  ")");
      }
    };
    merge(g.max_concurrent, rule.admission.max_concurrent, "max_concurrent");
    merge(g.queue_depth, written_depth[i], "queue_depth");
  }
  for (auto& [name, g] : groups) {
    AdmissionGroup& ag = p.admission_groups[g.index];
    if (g.max_concurrent) ag.max_concurrent = g.max_concurrent->value;
    if (g.queue_depth) {
      ag.queue_depth = g.queue_depth->value;
      if (!g.max_concurrent && g.queue_depth->value > 0) {
        r.error(g.queue_depth->ref,
                "a queue needs admission.max_concurrent (without a limit nobody waits)");
      }
    }
  }
  for (Rule& rule : p.rules) {
    const GroupDef& g = groups.at(rule.admission.group);
    rule.admission.group_index = g.index;
    rule.admission.max_concurrent = g.max_concurrent;
    const std::string adm = key_path(rule.ref.path, "admission");
    rule.admission.queue_depth =
        g.queue_depth ? *g.queue_depth : Limit{0, YamlRef{key_path(adm, "queue_depth"), 0, 0}};
  }
}

}  // namespace

void load_rules(YamlReader& r, const YAML::Node& node, const References& refs, Policy& p) {
  const std::string base = "policies";
  auto items = r.list(node, base);
  if (!items) return;
  if (items->empty()) {
    r.error(node, base, "must list at least one policy (a request that matches none gets 404)");
    return;
  }
  // Per rule, in p.rules order: the queue_depth as written (admission groups are resolved
  // after all rules), whether its match loaded cleanly, and whether the shadowing warnings look
  // at it (a clean match, not refused as unreachable).
  std::vector<std::optional<Limit>> written_depth;
  std::vector<bool> match_ok;
  std::vector<bool> checked;
  for (size_t i = 0; i < items->size(); ++i) {
    const YAML::Node& item = (*items)[i];
    const std::string path = index_path(base, i);
    auto loaded = load_rule(r, item, path, refs, p);
    if (!loaded) continue;
    const bool unreachable =
        loaded->match_ok && report_unreachable(r, item, path, p, match_ok, loaded->rule);
    written_depth.push_back(loaded->written_depth);
    match_ok.push_back(loaded->match_ok);
    checked.push_back(loaded->match_ok && !unreachable);
    p.rules.push_back(std::move(loaded->rule));
  }

  // Shadowing the error above cannot prove (several earlier rules, globs within globs) is a
  // warning, not an error: such a file is valid and loads.
  warn_shadowed_rules(r, p, checked);
  warn_uncovered_core_routes(r, node, p, checked);
  resolve_admission_groups(r, p, written_depth);
}

}  // namespace cutline::policy::detail
