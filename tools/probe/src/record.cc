#include "cutline/tools/probe/record.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace cutline::tools::probe {

std::string_view to_string(CauseSource source) {
  return source == CauseSource::kCutline ? "cutline" : "derived";
}

std::optional<double> RequestRecord::itl_mean_ms() const {
  if (itl_ms.empty()) return std::nullopt;
  return std::accumulate(itl_ms.begin(), itl_ms.end(), 0.0) / static_cast<double>(itl_ms.size());
}

std::optional<double> RequestRecord::itl_max_ms() const {
  if (itl_ms.empty()) return std::nullopt;
  return *std::max_element(itl_ms.begin(), itl_ms.end());
}

std::string content_hash(std::string_view text) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void apply_stop_record(RequestRecord& r, const proto::StopRecord& rec) {
  r.cause = std::string(proto::to_string(rec.cause));
  r.cause_source = CauseSource::kCutline;
  r.truncated = rec.truncated();
  r.model_stop = rec.cause == proto::Cause::kEos || rec.cause == proto::Cause::kStopSequence;
  r.policy = rec.policy;
  r.rule = rec.rule;
  r.limit = rec.limit;
  r.observed = rec.observed;
  r.unit = rec.unit;
  r.reporter = rec.reporter;
  if (rec.output_tokens > 0 || r.output_tokens == 0) {
    r.output_tokens = rec.output_tokens;
    r.count_method = std::string(proto::to_string(rec.count_method));
  }
  r.queue_ms = rec.queue_ms;
  if (!r.queue_ms && rec.phases) r.queue_ms = rec.phases->queue_ms;
  r.server_ttft_ms = rec.ttft_ms;
  r.preemptions = rec.preemptions;
  r.kv_bytes_peak = rec.kv_bytes_peak;
  r.device_free_bytes = rec.device_free_bytes;
  r.phases = rec.phases;
  r.model_state = rec.model_state;
  // The record's message explains a serving cut ("deadline 600 ms exceeded"); for the client's
  // own max_tokens it is not an error.
  if (r.error.empty() && !rec.message.empty() && proto::is_serving_cut(rec.cause)) {
    r.error = rec.message;
  }
}

void derive_cause(RequestRecord& r, bool saw_done) {
  using proto::Cause;
  r.cause_source = CauseSource::kDerived;
  r.model_stop = false;
  r.truncated = true;
  auto set = [&](Cause c) {
    r.cause = std::string(proto::to_string(c));
    r.truncated = proto::is_truncated(c);
    r.model_stop = c == Cause::kEos || c == Cause::kStopSequence;
  };
  if (r.client_timeout) return set(Cause::kClientCancel);
  if (!r.transport_error.empty()) return set(Cause::kUpstreamDisconnect);
  if (r.http_status == 429) return set(Cause::kAdmissionRejected);
  if (r.http_status == 403) return set(Cause::kPolicyDenied);  // the endpoint's policy says no
  if (r.http_status == 400 || r.http_status == 404 || r.http_status == 413 ||
      r.http_status == 415 || r.http_status == 422) {
    return set(Cause::kInvalidRequest);  // the request itself was refused
  }
  if (r.http_status != 200) return set(Cause::kUpstreamError);
  if (!r.error.empty()) return set(Cause::kUpstreamError);  // an SSE error event
  if (r.finish_reason.empty()) {
    if (!saw_done) return set(Cause::kUpstreamDisconnect);
    r.cause = std::string(kNoFinishReason);
    return;
  }
  if (r.finish_reason == "stop" || r.finish_reason == "tool_calls" ||
      r.finish_reason == "function_call") {
    return set(Cause::kEos);  // the model ended its turn (with or without calling tools)
  }
  if (r.finish_reason == "length") {
    if (r.max_tokens_requested && r.output_tokens >= *r.max_tokens_requested) {
      return set(Cause::kClientMaxTokens);
    }
    r.cause = std::string(kLengthBelowMax);
    return;
  }
  // content_filter, tool_calls, a cause name chosen by a policy (on_cut.finish_reason: cause).
  if (auto c = proto::parse_cause(r.finish_reason)) return set(*c);
  r.cause = r.finish_reason;
}

}  // namespace cutline::tools::probe
