#include "cutline/tools/probe/switch_scenarios.h"

#include <gtest/gtest.h>

namespace cutline::tools::probe {
namespace {

RequestRecord step(const SwitchStep& s, proto::TtftPhases phases, const std::string& state) {
  RequestRecord r;
  r.run = s.scenario;
  r.model = s.model;
  r.prompt_name = s.prompt_name;
  r.phases = phases;
  r.server_ttft_ms = phases.queue_ms + phases.load_ms + phases.warmup_ms + phases.prefill_ms +
                     phases.first_decode_ms;
  r.model_state = state;
  return r;
}

TEST(ProbeSwitch, PlanCoversColdSwitchReturnAndBothResidentWithShortAndLong) {
  const auto plan = switch_plan("A", "B");
  ASSERT_EQ(plan.size(), 10u);
  EXPECT_EQ(plan[2].scenario, kScenarioCold);
  EXPECT_EQ(plan[2].model, "B");
  EXPECT_EQ(plan[4].scenario, kScenarioReturn);
  EXPECT_EQ(plan[4].model, "A");
  int longs = 0;
  for (const auto& s : plan) longs += s.prompt_name == "long";
  EXPECT_EQ(longs, 5);
}

TEST(ProbeSwitch, NamesTheLoadOnTheColdSwitchAndNothingOnTheWarmReturn) {
  std::vector<RequestRecord> recs;
  for (const auto& s : switch_plan("A", "B")) {
    proto::TtftPhases p{0.2, 0, 0, s.prompt_name == "long" ? 30.0 : 3.0, 1};
    std::string state = "resident";
    if (s.scenario == kScenarioCold) {
      p.load_ms = 150;
      p.warmup_ms = 20;
      state = "cold";
    }
    recs.push_back(step(s, p, state));
  }
  const SwitchVerdict v = make_switch_verdict(recs);
  EXPECT_TRUE(v.phases_available);
  auto line_of = [&](const std::string& prefix) {
    for (const auto& l : v.lines) {
      if (l.rfind(prefix, 0) == 0) return l;
    }
    return std::string();
  };
  const std::string cold = line_of("cold switch to B (B, short prompt)");
  EXPECT_NE(cold.find("load grew most (+150.0 ms), warmup +20.0 ms"), std::string::npos) << cold;
  EXPECT_NE(cold.find("model_state cold"), std::string::npos);
  const std::string back = line_of("immediate return to A (A, short prompt)");
  EXPECT_NE(back.find("no phase grew"), std::string::npos) << back;
  const std::string prompt = line_of("long vs short prompt on warm A");
  EXPECT_NE(prompt.find("prefill grew most (+27.0 ms)"), std::string::npos) << prompt;
}

TEST(ProbeSwitch, WithoutPhasesSaysTotalTtftOnly) {
  std::vector<RequestRecord> recs;
  for (const auto& s : switch_plan("A", "B")) {
    RequestRecord r;
    r.run = s.scenario;
    r.model = s.model;
    r.prompt_name = s.prompt_name;
    r.ttft_ms = s.scenario == kScenarioCold ? 900 : 10;
    recs.push_back(r);
  }
  const SwitchVerdict v = make_switch_verdict(recs);
  EXPECT_FALSE(v.phases_available);
  EXPECT_EQ(v.lines[0].rfind("the endpoint reports no TTFT phases", 0), 0u);
  EXPECT_NE(v.lines[1].find("TTFT 900.0 ms vs 10.0 ms"), std::string::npos) << v.lines[1];
}

TEST(ProbeSwitch, GrownPhaseIgnoresNoise) {
  EXPECT_EQ(grown_phase({1, 0, 0, 10, 1}, {1, 0, 0, 9.5, 1}).phase, "");
  EXPECT_EQ(grown_phase({5, 0, 0, 10, 1}, {1, 0, 0, 10, 1}).phase, "queue");
}

}  // namespace
}  // namespace cutline::tools::probe
