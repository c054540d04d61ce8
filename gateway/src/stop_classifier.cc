#include "cutline/gateway/stop_classifier.h"

namespace cutline::gateway {

using proto::Cause;

bool budget_clamped(const TokenLimits& l) {
  if (!l.effective_max_tokens) return false;
  return !l.requested_max_tokens || *l.effective_max_tokens < *l.requested_max_tokens;
}

Cause classify_upstream_stop(const UpstreamEnd& end, const TokenLimits& limits) {
  switch (end.kind) {
    case UpstreamEndKind::kErrorStatus:
    case UpstreamEndKind::kErrorEvent:
      return Cause::kUpstreamError;
    case UpstreamEndKind::kNoFinish:
    case UpstreamEndKind::kDisconnect:
      return end.backend_cause ? *end.backend_cause : Cause::kUpstreamDisconnect;
    case UpstreamEndKind::kFinished:
      break;
  }
  if (end.backend_cause) {
    if (*end.backend_cause == Cause::kClientMaxTokens && budget_clamped(limits)) {
      return Cause::kGatewayBudget;
    }
    return *end.backend_cause;
  }
  const std::string_view r = end.finish_reason;
  if (r == "stop" || r == "tool_calls" || r == "function_call" || r == "eos") {
    return end.stop_reason_present ? Cause::kStopSequence : Cause::kEos;
  }
  if (r == "length") {
    const bool reached_limit = !limits.effective_max_tokens || !limits.exact_count ||
                               limits.output_tokens >= *limits.effective_max_tokens;
    if (limits.effective_max_tokens && reached_limit) {
      return budget_clamped(limits) ? Cause::kGatewayBudget : Cause::kClientMaxTokens;
    }
    return Cause::kContextLength;
  }
  if (r == "content_filter") return Cause::kContentFilter;
  return Cause::kUpstreamError;
}

}  // namespace cutline::gateway
