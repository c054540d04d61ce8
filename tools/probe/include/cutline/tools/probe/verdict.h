#pragma once
// Verdict: what the concurrency sweep shows, per level, in sentences a user can act on. Each
// level is compared with the lowest level answer by answer (same prompt, same seed): how many
// answers got shorter, and which stop causes (with the policy rule and limit behind them)
// explain the shortening; or that lengths held and stops stayed model stops, so only latency
// grew. Equal seeds with different outputs are flagged — as a serving defect when the endpoint
// claims batch-invariant sampling.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cutline/tools/probe/record.h"

namespace cutline::tools::probe {

struct LevelSummary {
  int concurrency = 0;
  int answers = 0;
  double mean_output_tokens = 0;
  int64_t min_output_tokens = 0;
  int64_t median_output_tokens = 0;
  int64_t max_output_tokens = 0;
  int model_stops = 0;         // eos or stop_sequence
  double completion_rate = 0;  // model_stops / answers
  std::map<std::string, int> causes;
  int shorter = 0;     // answers shorter than the baseline answer with the same prompt and seed
  int compared = 0;    // answers that had a baseline to compare with
  int differing = 0;   // complete answers whose text differs from the baseline's at equal seeds
  int not_prefix = 0;  // shorter answers that are not a prefix of the baseline's text
  std::map<std::string, int> shorter_causes;
  std::optional<double> ttft_p50_ms, ttft_p90_ms, ttft_p99_ms;
  std::optional<double> itl_p50_ms, itl_p90_ms, itl_p99_ms;
};

struct LoadVerdict {
  std::vector<LevelSummary> levels;
  std::vector<std::string> lines;  // one or more sentences per level, then notes
  bool batch_invariant_claimed = false;
  bool serving_defect = false;  // equal seeds gave different outputs on a batch-invariant endpoint
};

// Nearest-rank percentile (p in [0, 100]) of `values`; nullopt when empty.
std::optional<double> percentile(std::vector<double> values, double p);

// `batch_invariant`: unset = claimed when every answer carried a Cutline backend's record (the
// backend's sampling is batch-invariant by design).
LoadVerdict make_load_verdict(const std::vector<RequestRecord>& records,
                              std::optional<bool> batch_invariant);

// "29 ended by gateway_deadline (policy interactive, rule policies[0].deadline, 30 s)".
std::string describe_cause(const std::string& cause, const std::vector<RequestRecord>& examples);

}  // namespace cutline::tools::probe
