#include "cutline/tools/probe/switch_scenarios.h"

#include <array>
#include <cstdio>

namespace cutline::tools::probe {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::array<std::pair<const char*, double>, 5> phase_list(const proto::TtftPhases& p) {
  return {{{"queue", p.queue_ms},
           {"load", p.load_ms},
           {"warmup", p.warmup_ms},
           {"prefill", p.prefill_ms},
           {"first_decode", p.first_decode_ms}}};
}

double phase_sum(const proto::TtftPhases& p) {
  return p.queue_ms + p.load_ms + p.warmup_ms + p.prefill_ms + p.first_decode_ms;
}

const RequestRecord* find(const std::vector<RequestRecord>& records, const std::string& scenario,
                          const std::string& prompt) {
  for (const auto& r : records) {
    if (r.run == scenario && r.prompt_name == prompt) return &r;
  }
  return nullptr;
}

std::string ttft_text(const RequestRecord& r) {
  const auto t = r.server_ttft_ms ? r.server_ttft_ms : r.ttft_ms;
  return t ? fmt("%.1f ms", *t) : std::string("n/a");
}

// "load grew most (+140.2 ms), then warmup (+8.0 ms)" or "no phase grew".
std::string growth_text(const proto::TtftPhases& step, const proto::TtftPhases& warm) {
  const PhaseGrowth top = grown_phase(step, warm);
  if (top.phase.empty()) return "no phase grew";
  std::string out = top.phase + " grew most (+" + fmt("%.1f", top.delta_ms) + " ms)";
  const auto s = phase_list(step);
  const auto w = phase_list(warm);
  for (size_t i = 0; i < s.size(); ++i) {
    const double d = s[i].second - w[i].second;
    if (s[i].first != top.phase && d > 2.0)
      out += ", " + std::string(s[i].first) + " +" + fmt("%.1f", d) + " ms";
  }
  return out;
}

}  // namespace

std::vector<SwitchStep> switch_plan(const std::string& a, const std::string& b) {
  return {
      {kScenarioBaseline, a, "short"}, {kScenarioBaseline, a, "long"},
      {kScenarioCold, b, "short"},     {kScenarioJustLoaded, b, "long"},
      {kScenarioReturn, a, "short"},   {kScenarioReturn, a, "long"},
      {kScenarioBothB, b, "short"},    {kScenarioBothB, b, "long"},
      {kScenarioBothA, a, "short"},    {kScenarioBothA, a, "long"},
  };
}

PhaseGrowth grown_phase(const proto::TtftPhases& step, const proto::TtftPhases& warm) {
  PhaseGrowth best;
  const auto s = phase_list(step);
  const auto w = phase_list(warm);
  const double threshold = std::max(2.0, 0.1 * phase_sum(warm));
  for (size_t i = 0; i < s.size(); ++i) {
    const double d = s[i].second - w[i].second;
    if (d > threshold && d > best.delta_ms) best = {s[i].first, d};
  }
  return best;
}

SwitchVerdict make_switch_verdict(const std::vector<RequestRecord>& records) {
  SwitchVerdict v;
  v.phases_available = !records.empty();
  for (const auto& r : records) v.phases_available = v.phases_available && r.phases.has_value();
  if (!v.phases_available) {
    v.lines.push_back(
        "the endpoint reports no TTFT phases (no Cutline backend behind it): total TTFT only, "
        "measured by the probe from request sent to first token");
  }
  for (const auto& r : records) {
    if (r.run == kScenarioBaseline || r.run == kScenarioBothB) continue;
    const bool is_b =
        r.run == kScenarioCold || r.run == kScenarioJustLoaded || r.run == kScenarioBothB;
    const char* warm_name = is_b ? kScenarioBothB : kScenarioBaseline;
    const RequestRecord* warm = find(records, warm_name, r.prompt_name);
    std::string line =
        r.run + " (" + r.model + ", " + r.prompt_name + " prompt): TTFT " + ttft_text(r);
    if (!warm) {
      v.lines.push_back(line + " (no warm reference recorded)");
      continue;
    }
    line += " vs " + ttft_text(*warm) + " with " + r.model + " warm";
    if (r.http_status != 200 || !r.transport_error.empty()) line += " [error: " + r.error + "]";
    if (r.phases && warm->phases) {
      line += "; " + growth_text(*r.phases, *warm->phases);
    } else if (v.phases_available) {
      line += "; phases missing on one of the two";
    }
    if (!r.model_state.empty()) line += "; model_state " + r.model_state;
    v.lines.push_back(line);
  }
  // Prompt length on a warm model: prefill, not the switch.
  const RequestRecord* short_a = find(records, kScenarioBaseline, "short");
  const RequestRecord* long_a = find(records, kScenarioBaseline, "long");
  if (short_a && long_a) {
    std::string line = "long vs short prompt on warm " + long_a->model + ": TTFT " +
                       ttft_text(*long_a) + " vs " + ttft_text(*short_a);
    if (long_a->phases && short_a->phases) {
      line += "; " + growth_text(*long_a->phases, *short_a->phases);
    }
    v.lines.push_back(line);
  }
  return v;
}

}  // namespace cutline::tools::probe
