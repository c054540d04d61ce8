// `cutline policy diff` (diff.h): rules paired by name, each value compared in explain's words.
#include "cutline/policy/diff.h"

#include <cstdio>
#include <optional>
#include <vector>

#include "cutline/policy/duration.h"

namespace cutline::policy {

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ",";
    out += items[i];
  }
  return out;
}

// A line < 0 marks a value proposed by a tool (`cutline policy advise`), not read from a file.
std::string line_of(const YamlRef& ref) {
  if (ref.line < 0) return " (proposed)";
  return ref.line > 0 ? " (line " + std::to_string(ref.line) + ")" : " (default)";
}

// Whom a rule applies to, as `check` prints it.
std::string who(const Rule& r) {
  std::string out = "tenants " + join(r.match.tenants) + "  models " + join(r.match.models) +
                    "  routes " + join(r.match.routes);
  for (const auto& h : r.match.headers) out += "  " + h.name + "=" + h.pattern;
  return out;
}

// One named value of a rule, as explain prints it, and where it was written.
struct Value {
  std::string name;
  std::string text;
  YamlRef ref;
};

std::string tokens(const std::optional<Limit>& l) {
  return l ? std::to_string(l->value) : std::string("unlimited");
}
std::string ms(const std::optional<Limit>& l) {
  return l ? format_duration_ms(l->value) : std::string("-");
}
YamlRef ref_or(const std::optional<Limit>& l, const YamlRef& rule, std::string_view key) {
  return l ? l->ref : YamlRef{rule.path + "." + std::string(key), 0, 0};
}

std::vector<Value> values_of(const Rule& r) {
  const Budget& b = r.budget;
  std::vector<Value> v;
  v.push_back({"max_output_tokens", tokens(b.max_output_tokens),
               ref_or(b.max_output_tokens, r.ref, "budget.max_output_tokens")});
  std::string adaptive;
  for (const auto& s : b.adaptive) {
    if (!adaptive.empty()) adaptive += ", ";
    adaptive += "queue_depth>" + std::to_string(s.queue_depth_gt) + " -> " +
                std::to_string(s.max_output_tokens.value);
  }
  v.push_back({"adaptive", adaptive.empty() ? "-" : adaptive,
               b.adaptive.empty()
                   ? YamlRef{r.ref.path + ".budget.adaptive", 0, 0}
                   : YamlRef{r.ref.path + ".budget.adaptive", b.adaptive.front().ref.line, 0}});
  v.push_back({"tenant_pool",
               b.tenant_tokens_per_minute
                   ? std::to_string(b.tenant_tokens_per_minute->value) + "/min"
                   : "-",
               ref_or(b.tenant_tokens_per_minute, r.ref, "budget.tenant_tokens_per_minute")});
  v.push_back({"global_pool",
               b.global_tokens_per_minute
                   ? std::to_string(b.global_tokens_per_minute->value) + "/min"
                   : "-",
               ref_or(b.global_tokens_per_minute, r.ref, "budget.global_tokens_per_minute")});
  v.push_back({"on_pool_exhausted",
               b.on_pool_exhausted == PoolExhausted::kClamp ? "clamp" : "reject",
               b.on_pool_exhausted_ref});
  v.push_back(
      {"min_output_tokens", std::to_string(b.min_output_tokens.value), b.min_output_tokens.ref});
  v.push_back(
      {"max_choices", tokens(b.max_choices), ref_or(b.max_choices, r.ref, "budget.max_choices")});
  v.push_back({"deadline", ms(r.deadline_ms), ref_or(r.deadline_ms, r.ref, "deadline")});
  v.push_back(
      {"ttft_timeout", ms(r.ttft_timeout_ms), ref_or(r.ttft_timeout_ms, r.ref, "ttft_timeout")});
  v.push_back(
      {"idle_timeout", ms(r.idle_timeout_ms), ref_or(r.idle_timeout_ms, r.ref, "idle_timeout")});
  const Admission& a = r.admission;
  v.push_back({"admission group", a.group, YamlRef{r.ref.path + ".admission.group", 0, 0}});
  v.push_back({"priority", std::string(to_string(a.priority)), a.priority_ref});
  v.push_back({"max_concurrent", tokens(a.max_concurrent),
               ref_or(a.max_concurrent, r.ref, "admission.max_concurrent")});
  v.push_back({"queue_depth", std::to_string(a.queue_depth.value), a.queue_depth.ref});
  v.push_back(
      {"queue_timeout", format_duration_ms(a.queue_timeout_ms.value), a.queue_timeout_ms.ref});
  v.push_back(
      {"on_cut",
       std::string(to_string(r.on_cut.mode)) + "/" + std::string(to_string(r.on_cut.finish_reason)),
       r.on_cut.ref});
  v.push_back({"upstream", r.upstream.empty() ? std::string("by model") : r.upstream,
               r.upstream.empty() ? YamlRef{r.ref.path + ".upstream", 0, 0} : r.upstream_ref});
  v.push_back({"forward_client_key", r.forward_client_key ? "true" : "false",
               YamlRef{r.ref.path + ".forward_client_key", 0, 0}});
  // Defaults of a section that was not written carry no path: name the key they stand for.
  for (Value& value : v) {
    if (value.ref.path.empty()) value.ref.path = r.ref.path + ".budget." + value.name;
  }
  return v;
}

void row(std::string& out, const std::string& name, const std::string& value, const YamlRef& ref) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "    %-20s %-24s ", name.c_str(), value.c_str());
  out += buf;
  out += ref.path + line_of(ref) + "\n";
}

std::string header(const Rule& r) {
  return "policy \"" + r.name + "\"  (" + r.ref.path + line_of(r.ref) + ")  " + who(r);
}

const Rule* find(const Policy& p, const std::string& name) { return p.find_rule(name); }

template <typename T, typename NameOf>
void added_removed(std::string& out, bool& changed, std::string_view what,
                   const std::vector<T>& before, const std::vector<T>& after, NameOf name_of) {
  for (const T& a : after) {
    bool found = false;
    for (const T& b : before) found = found || name_of(b) == name_of(a);
    if (!found) {
      out += std::string(what) + " \"" + name_of(a) + "\" added\n";
      changed = true;
    }
  }
  for (const T& b : before) {
    bool found = false;
    for (const T& a : after) found = found || name_of(b) == name_of(a);
    if (!found) {
      out += std::string(what) + " \"" + name_of(b) + "\" removed\n";
      changed = true;
    }
  }
}

}  // namespace

std::string diff(const Policy& before, const Policy& after, bool* changed_out) {
  std::string out;
  bool changed = false;
  for (const Rule& now : after.rules) {
    const Rule* was = find(before, now.name);
    if (!was) {
      out += header(now) + "  added\n";
      bool any = false;
      for (const Value& v : values_of(now)) {
        if (v.ref.line == 0) continue;  // a default: what every rule gets
        row(out, v.name, v.text, v.ref);
        any = true;
      }
      if (!any) out += "    no limits: every value is its default\n";
      changed = true;
      continue;
    }
    std::string rows;
    if (who(*was) != who(now)) {
      rows += "    match                " + who(*was) + "\n";
      rows += "                      -> " + who(now) + "\n";
    }
    const std::vector<Value> old_values = values_of(*was);
    const std::vector<Value> new_values = values_of(now);
    for (size_t i = 0; i < new_values.size(); ++i) {
      if (old_values[i].text == new_values[i].text) continue;
      row(rows, new_values[i].name, old_values[i].text + " -> " + new_values[i].text,
          new_values[i].ref);
    }
    if (!rows.empty()) {
      out += header(now) + "\n" + rows;
      changed = true;
    }
  }
  for (const Rule& was : before.rules) {
    if (!find(after, was.name)) {
      out += header(was) + "  removed: its requests now match a later rule or get 404\n";
      changed = true;
    }
  }
  // First match wins: the same rules in another order can send a request elsewhere.
  std::vector<std::string> order_before;
  std::vector<std::string> order_after;
  for (const Rule& r : before.rules) {
    if (find(after, r.name)) order_before.push_back(r.name);
  }
  for (const Rule& r : after.rules) {
    if (find(before, r.name)) order_after.push_back(r.name);
  }
  if (order_before != order_after) {
    out += "first-match order: " + join(order_before) + " -> " + join(order_after) +
           " (a request may now match another rule)\n";
    changed = true;
  }
  added_removed(out, changed, "tenant", before.tenants, after.tenants,
                [](const Tenant& t) { return t.name; });
  added_removed(out, changed, "upstream", before.upstreams, after.upstreams,
                [](const Upstream& u) { return u.name; });
  for (const Upstream& now : after.upstreams) {
    const Upstream* was = before.find_upstream(now.name);
    if (was && (was->url != now.url || was->models != now.models)) {
      out += "upstream \"" + now.name + "\": " + was->url + " models " + join(was->models) +
             " -> " + now.url + " models " + join(now.models) + "\n";
      changed = true;
    }
  }
  if (!changed) out = "no changes\n";
  if (changed_out) *changed_out = changed;
  return out;
}

}  // namespace cutline::policy
