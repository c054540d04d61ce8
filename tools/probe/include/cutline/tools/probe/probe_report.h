#pragma once
// ProbeReport: one probe run as the writers see it — what was run (mode, endpoint, label,
// sampling, the endpoint's /v1/cutline/policy when an admin URL was given), every request
// record, and the verdict. The JSON, CSV, HTML and terminal writers all read this one value.

#include <string>
#include <vector>

#include "cutline/tools/probe/options.h"
#include "cutline/tools/probe/record.h"
#include "cutline/tools/probe/switch_scenarios.h"
#include "cutline/tools/probe/verdict.h"

namespace cutline::tools::probe {

struct ProbeReport {
  ProbeMode mode = ProbeMode::kLoad;
  std::string url;
  std::string label;
  std::string model;  // load: the model; switch: "A,B"
  int64_t max_tokens = 0;
  double temperature = 0;
  int64_t seed = 0;
  std::string started_utc;   // ISO 8601, for the reader; timings use the monotonic clock
  std::string policy_json;   // raw /v1/cutline/policy body, empty when not fetched
  std::string policy_error;  // why it could not be fetched
  std::vector<RequestRecord> records;
  LoadVerdict load;
  SwitchVerdict switch_verdict;

  const std::vector<std::string>& verdict_lines() const {
    return mode == ProbeMode::kLoad ? load.lines : switch_verdict.lines;
  }
};

}  // namespace cutline::tools::probe
