#pragma once
// `cutline policy advise ACCESS_LOG [--target-cut-rate 1%] [--policy FILE]`: limits proposed
// from the gateway's own access log (gateway/src/access_log.cc, one JSON object per line).
//
// Per policy and model, over the requests that reached an upstream (not invalid_request,
// admission_rejected or policy_denied), each limit is set at the (1 - target) quantile (nearest
// rank) of what the requests measured, so that at most the target share of that traffic would have
// been cut:
//   budget.max_output_tokens   output_tokens
//   deadline                   duration_ms            (rounded up to 10 ms)
//   ttft_timeout               ttft_ms                (rounded up to 10 ms)
//   idle_timeout               itl_max_ms (largest inter-token gap of each answer; up to 10 ms)
//   admission.max_concurrent   requests of the same policy and model in flight at each arrival
//                              (the request itself included), from ts and duration_ms; with
//                              --policy, a rule's proposal is the largest over its models
// with the percentiles behind each (p50, p90, p99, max) and the queue wait seen (queue_ms).
// Each proposal then gets headroom, so that normal variation is not cut the day after: durations
// x kTimeHeadroom (1.5, then rounded up to 10 ms), output tokens and concurrency x
// kCountHeadroom (1.25, rounded up).
// Only generation requests are measured: POST /v1/chat/completions, /v1/completions and
// /v1/responses (a line without method and path counts as one). GET /v1/models, embeddings and
// passed-through paths are counted (not_generation) and left out: they have no output tokens,
// TTFT or inter-token gaps to propose limits from.
// A group with fewer than kMinSample requests gets a warning line: its tail quantile is close
// to its largest sample and the proposal is noise.
// What the log shows was already shaped by the limits in force: an answer cut at a deadline
// says nothing about how long it would have run (rule in observe mode for that).
// Deterministic: the same log gives the same report. The names the log carries (model, policy)
// are printed escaped (printable); a line with an absurd number is skipped and counted in a
// warning line; no proposed duration is under 10 ms.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cutline/base/result.h"

namespace cutline::tools {

// What one policy and model measured, one entry per request.
struct Observed {
  std::vector<double> output_tokens;
  std::vector<double> duration_ms;
  std::vector<double> ttft_ms;
  std::vector<double> itl_max_ms;
  std::vector<double> queue_ms;
  std::vector<std::pair<double, double>> spans_ms;  // (start, end) from ts, for concurrency
};

// Headroom over the measured quantile, and the sample below which a proposal is flagged.
inline constexpr double kTimeHeadroom = 1.5;
inline constexpr double kCountHeadroom = 1.25;
inline constexpr int64_t kMinSample = 200;

struct Proposal {
  std::optional<int64_t> max_output_tokens;
  std::optional<int64_t> deadline_ms;
  std::optional<int64_t> ttft_timeout_ms;
  std::optional<int64_t> idle_timeout_ms;
  std::optional<int64_t> max_concurrent;
};

struct AdviceInput {
  // (policy, model) -> observations; the policy "" is "no rule matched".
  std::map<std::pair<std::string, std::string>, Observed> groups;
  int64_t lines = 0;
  int64_t skipped = 0;  // refused before an upstream (invalid_request, admission_rejected,
                        // policy_denied)
  // Left out: a measured number negative, not finite or over 2^31 - 1 (ms or tokens), or a
  // `ts` that is no Unix time. The report says how many.
  int64_t absurd = 0;
  // Not generation (GET /v1/models, embeddings, passed-through paths): not measured.
  int64_t not_generation = 0;
};

// Reads the log text. An empty log, a line that is not complete JSON (truncated), or lines
// that are not Cutline access-log lines (no stop record) are errors naming the line.
Result<AdviceInput> read_access_log(std::string_view text);

// The nearest-rank q quantile of `values` (sorted in place); nullopt when empty.
std::optional<double> quantile(std::vector<double>& values, double q);

// The proposed limits of one group at `target` (0 < target < 1), headroom included.
Proposal propose(Observed& observed, double target);

// `text` with what a terminal would act on escaped: control characters (C0, DEL, C1), bytes
// that are not well-formed UTF-8 as \xHH, and '"' and '\' with a backslash.
std::string printable(std::string_view text);

// The report: per policy and model, each proposed limit and the numbers behind it.
std::string render_advice(AdviceInput& input, double target);

}  // namespace cutline::tools
