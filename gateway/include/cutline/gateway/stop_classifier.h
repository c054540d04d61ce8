#pragma once
// Stop classification: how an upstream's end of stream maps onto the cause taxonomy. Pure
// functions, called by the relay phase when the upstream ends (or fails) before the gateway cut.
//
// The rules:
// - an HTTP error status or an SSE error event                  -> upstream_error
// - the stream ended without any finish_reason (EOF, reset, or even a bare [DONE])
//                                                               -> upstream_disconnect
// - a Cutline backend's own "cutline" object names the cause    -> that cause, except that a
//   backend's client_max_tokens on a max_tokens the gateway lowered is gateway_budget
// - finish_reason "stop" (or tool_calls/function_call)          -> eos, or stop_sequence when
//   the upstream names the matched stop (vLLM's choices[].stop_reason)
// - finish_reason "length" at the max_tokens sent upstream      -> gateway_budget when the
//   policy lowered it below the client's own limit, else client_max_tokens
// - finish_reason "length" short of that limit (exact count)    -> context_length
// - finish_reason "content_filter"                              -> content_filter (origin model)
// - any other finish_reason ("abort", a value added later, ...) -> upstream_error
// The finish_reason itself reaches the client as the upstream sent it in every one of these
// cases; only a cut the gateway makes rewrites it (Stream::client_finish_reason).

#include <cstdint>
#include <optional>
#include <string_view>

#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {

enum class UpstreamEndKind : uint8_t {
  kFinished,     // a finish_reason was seen (then [DONE] or EOF)
  kNoFinish,     // the stream ended ([DONE] or EOF) without a finish_reason
  kErrorStatus,  // the upstream answered an HTTP error status
  kErrorEvent,   // the upstream sent an error event / error object mid-stream
  kDisconnect,   // the connection failed or closed mid-body
};

struct UpstreamEnd {
  UpstreamEndKind kind = UpstreamEndKind::kNoFinish;
  std::string_view finish_reason;             // when kFinished
  bool stop_reason_present = false;           // choices[].stop_reason was a string or a token id
  std::optional<proto::Cause> backend_cause;  // from the upstream's own "cutline" object
};

struct TokenLimits {
  std::optional<int64_t> requested_max_tokens;  // the client's own limit
  std::optional<int64_t> effective_max_tokens;  // what was sent upstream
  int64_t output_tokens = 0;
  bool exact_count = true;  // output_tokens came from usage (not from counting chunks)
};

// True when the policy lowered the limit the client asked for (or set one where it had none).
bool budget_clamped(const TokenLimits& limits);

proto::Cause classify_upstream_stop(const UpstreamEnd& end, const TokenLimits& limits);

}  // namespace cutline::gateway
