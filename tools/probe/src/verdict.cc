#include "cutline/tools/probe/verdict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace cutline::tools::probe {

namespace {

using Key = std::tuple<int, int, int64_t>;  // prompt, repeat, seed

Key key_of(const RequestRecord& r) { return {r.prompt_index, r.repeat, r.seed.value_or(-1)}; }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string limit_text(double limit, const std::string& unit) {
  if (unit == "ms") {
    if (limit >= 1000) return fmt("%g s", limit / 1000.0);
    return fmt("%g ms", limit);
  }
  if (unit.empty()) return fmt("%g", limit);
  return fmt("%g ", limit) + unit;
}

std::string ms_text(const std::optional<double>& v) { return v ? fmt("%.1f", *v) : "n/a"; }

bool is_model_stop(const std::string& cause) { return cause == "eos" || cause == "stop_sequence"; }

std::string causes_text(const std::map<std::string, int>& causes) {
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [c, n] : causes) sorted.push_back({-n, c});
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (const auto& [n, c] : sorted) {
    if (!out.empty()) out += ", ";
    out += c + " " + std::to_string(-n);
  }
  return out;
}

}  // namespace

std::optional<double> percentile(std::vector<double> values, double p) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(i, values.size() - 1)];
}

std::string describe_cause(const std::string& cause, const std::vector<RequestRecord>& examples) {
  // The most common (policy, rule, limit, unit) among the examples with this cause.
  std::map<std::tuple<std::string, std::string, double, std::string>, int> contexts;
  for (const auto& r : examples) {
    if (r.cause != cause || (r.policy.empty() && r.rule.empty())) continue;
    ++contexts[{r.policy, r.rule, r.limit.value_or(NAN), r.unit}];
  }
  std::string out = cause;
  if (contexts.empty()) return out;
  auto best = std::max_element(contexts.begin(), contexts.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  const auto& [policy, rule, limit, unit] = best->first;
  std::string ctx;
  if (!policy.empty()) ctx += "policy " + policy;
  if (!rule.empty()) ctx += std::string(ctx.empty() ? "" : ", ") + "rule " + rule;
  if (!std::isnan(limit)) ctx += std::string(ctx.empty() ? "" : ", ") + limit_text(limit, unit);
  return out + " (" + ctx + ")";
}

namespace {

// One concurrency level's numbers. Outside the baseline level each answer is compared with the
// baseline's answer of the same prompt, repeat and seed; the shorter ones are copied into
// `shorter_recs`.
LevelSummary summarize_level(int level, const std::vector<const RequestRecord*>& recs, bool is_base,
                             const std::map<Key, const RequestRecord*>& baseline,
                             std::vector<RequestRecord>& shorter_recs) {
  LevelSummary s;
  s.concurrency = level;
  s.answers = static_cast<int>(recs.size());
  std::vector<int64_t> tokens;
  std::vector<double> ttft, itl;
  for (const auto* r : recs) {
    tokens.push_back(r->output_tokens);
    ++s.causes[r->cause];
    if (r->model_stop) ++s.model_stops;
    if (r->ttft_ms) ttft.push_back(*r->ttft_ms);
    itl.insert(itl.end(), r->itl_ms.begin(), r->itl_ms.end());
    if (is_base) continue;
    auto b = baseline.find(key_of(*r));
    if (b == baseline.end()) continue;
    ++s.compared;
    const RequestRecord& base = *b->second;
    if (r->output_tokens < base.output_tokens) {
      ++s.shorter;
      ++s.shorter_causes[r->cause];
      shorter_recs.push_back(*r);
      if (base.content.compare(0, r->content.size(), r->content) != 0) ++s.not_prefix;
    } else if (r->model_stop && base.model_stop && r->content_hash != base.content_hash) {
      ++s.differing;
    }
  }
  std::sort(tokens.begin(), tokens.end());
  double sum = 0;
  for (auto t : tokens) sum += static_cast<double>(t);
  s.mean_output_tokens = tokens.empty() ? 0 : sum / static_cast<double>(tokens.size());
  s.min_output_tokens = tokens.empty() ? 0 : tokens.front();
  s.max_output_tokens = tokens.empty() ? 0 : tokens.back();
  s.median_output_tokens = tokens.empty() ? 0 : tokens[(tokens.size() - 1) / 2];
  s.completion_rate = s.answers ? static_cast<double>(s.model_stops) / s.answers : 0;
  s.ttft_p50_ms = percentile(ttft, 50);
  s.ttft_p90_ms = percentile(ttft, 90);
  s.ttft_p99_ms = percentile(ttft, 99);
  s.itl_p50_ms = percentile(itl, 50);
  s.itl_p90_ms = percentile(itl, 90);
  s.itl_p99_ms = percentile(itl, 99);
  return s;
}

// The verdict line of one level: the baseline's numbers (`base` null), the answers that got
// shorter and what ended them, or that only latency changed.
std::string level_line(const LevelSummary& s, int base_level, const LevelSummary* base,
                       const std::vector<RequestRecord>& shorter_recs) {
  const std::string lvl = "at concurrency " + std::to_string(s.concurrency);
  if (!base) {
    return lvl + " (baseline): " + std::to_string(s.answers) + " answers, output tokens mean " +
           fmt("%.1f", s.mean_output_tokens) + " (min " + std::to_string(s.min_output_tokens) +
           ", median " + std::to_string(s.median_output_tokens) + ", max " +
           std::to_string(s.max_output_tokens) + "); " + std::to_string(s.model_stops) + " of " +
           std::to_string(s.answers) + " stopped by the model; stops: " + causes_text(s.causes) +
           "; TTFT p50 " + ms_text(s.ttft_p50_ms) + " ms";
  }
  if (s.shorter > 0) {
    std::string line = lvl + ", " + std::to_string(s.shorter) + " of " + std::to_string(s.answers) +
                       " answers were shorter than at " + std::to_string(base_level) + " (mean " +
                       fmt("%.1f", s.mean_output_tokens) + " vs " +
                       fmt("%.1f", base->mean_output_tokens) + " output tokens); ";
    std::vector<std::pair<int, std::string>> sorted;
    for (const auto& [c, n] : s.shorter_causes) sorted.push_back({-n, c});
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (i > 0) line += ", ";
      line += std::to_string(-sorted[i].first) + (i == 0 ? " ended by " : " by ") +
              describe_cause(sorted[i].second, shorter_recs);
    }
    return line;
  }
  const bool all_model = std::all_of(s.causes.begin(), s.causes.end(),
                                     [](const auto& c) { return is_model_stop(c.first); });
  const bool same_causes =
      s.causes.size() == base->causes.size() &&
      std::equal(s.causes.begin(), s.causes.end(), base->causes.begin(),
                 [](const auto& a, const auto& b) { return a.first == b.first; });
  std::string latency = "TTFT p50 " + ms_text(base->ttft_p50_ms) + " -> " + ms_text(s.ttft_p50_ms) +
                        " ms, inter-token p50 " + ms_text(base->itl_p50_ms) + " -> " +
                        ms_text(s.itl_p50_ms) + " ms";
  if (all_model && same_causes) {
    std::string stops;
    for (const auto& [c, n] : s.causes) stops += (stops.empty() ? "" : "/") + c;
    return lvl + ", lengths did not change and stops stayed " + stops + ": only latency grew (" +
           latency + ")";
  }
  return lvl + ", lengths did not change; stops: " + causes_text(s.causes) + " (" + latency + ")";
}

// Answers that differ from the baseline's at equal seeds: a serving defect when the endpoint
// claims batch-invariant sampling, a note otherwise.
void note_differences(const LevelSummary& s, int base_level, LoadVerdict& v) {
  if (s.differing == 0 && s.not_prefix == 0) return;
  const int n = s.differing + s.not_prefix;
  std::string what = std::to_string(n) + " of " + std::to_string(s.compared) +
                     " answers at concurrency " + std::to_string(s.concurrency) +
                     " differ from concurrency " + std::to_string(base_level) + " at equal seeds";
  if (v.batch_invariant_claimed) {
    v.serving_defect = true;
    v.lines.push_back("SERVING DEFECT: " + what +
                      ", although the endpoint claims batch-invariant sampling");
  } else {
    v.lines.push_back("note: " + what +
                      " (the endpoint does not claim batch-invariant sampling, so this is "
                      "not attributed to serving)");
  }
}

}  // namespace

LoadVerdict make_load_verdict(const std::vector<RequestRecord>& records,
                              std::optional<bool> batch_invariant) {
  LoadVerdict v;
  std::map<int, std::vector<const RequestRecord*>> by_level;
  for (const auto& r : records) by_level[r.concurrency].push_back(&r);
  if (by_level.empty()) {
    v.lines.push_back("no answers were recorded");
    return v;
  }
  if (batch_invariant) {
    v.batch_invariant_claimed = *batch_invariant;
  } else {
    v.batch_invariant_claimed = std::all_of(records.begin(), records.end(), [](const auto& r) {
      return r.phases.has_value() && !r.reporter.empty();
    });
  }
  const int base_level = by_level.begin()->first;
  std::map<Key, const RequestRecord*> baseline;
  for (const auto* r : by_level.begin()->second) baseline.emplace(key_of(*r), r);

  std::optional<LevelSummary> base_summary;
  for (const auto& [level, recs] : by_level) {
    std::vector<RequestRecord> shorter_recs;
    LevelSummary s = summarize_level(level, recs, level == base_level, baseline, shorter_recs);
    v.lines.push_back(
        level_line(s, base_level, base_summary ? &*base_summary : nullptr, shorter_recs));
    if (level == base_level) base_summary = s;
    note_differences(s, base_level, v);
    v.levels.push_back(std::move(s));
  }
  return v;
}

}  // namespace cutline::tools::probe
