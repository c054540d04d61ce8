#pragma once
// Switch scenarios: the fixed sequence of requests `cutline probe switch` sends (concurrency 1,
// same sampling) and the reading of their TTFT phases. Sequence, with A loaded and B not:
//   baseline: A resident      short, long
//   cold switch to B          short        (the first request to B: load + warm-up expected)
//   B just loaded             long
//   immediate return to A     short, long
//   both resident: B          short, long
//   both resident: A          short, long
// Each step is compared with the same model and prompt when warm (A: the baseline, B: "both
// resident: B"), phase by phase when the endpoint reports TTFT phases (a Cutline backend), else
// total TTFT only — said plainly. The long prompt is compared with the short one on warm A, so
// a prefill-driven TTFT is told apart from a switch. Each step's prompt starts with its own
// step number so that a prefix cache cannot serve one step from another's blocks.

#include <optional>
#include <string>
#include <vector>

#include "cutline/proto/wire/stop_record.h"
#include "cutline/tools/probe/record.h"

namespace cutline::tools::probe {

struct SwitchStep {
  std::string scenario;
  std::string model;
  std::string prompt_name;  // "short" | "long"
};

inline constexpr const char* kScenarioBaseline = "baseline: A resident";
inline constexpr const char* kScenarioCold = "cold switch to B";
inline constexpr const char* kScenarioJustLoaded = "B just loaded";
inline constexpr const char* kScenarioReturn = "immediate return to A";
inline constexpr const char* kScenarioBothB = "both resident: B";
inline constexpr const char* kScenarioBothA = "both resident: A";

std::vector<SwitchStep> switch_plan(const std::string& model_a, const std::string& model_b);

struct PhaseGrowth {
  std::string phase;  // "queue" | "load" | "warmup" | "prefill" | "first_decode" | "" (none grew)
  double delta_ms = 0;
};

// The phase whose time grew most from `warm` to `step` (empty phase when none grew by more than
// 2 ms and 10% of the warm TTFT).
PhaseGrowth grown_phase(const proto::TtftPhases& step, const proto::TtftPhases& warm);

struct SwitchVerdict {
  std::vector<std::string> lines;
  bool phases_available = false;
};

SwitchVerdict make_switch_verdict(const std::vector<RequestRecord>& records);

}  // namespace cutline::tools::probe
