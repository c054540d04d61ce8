#pragma once
// The stop record: why a response ended. Every response Cutline handles, streamed or not, ends
// with exactly one StopRecord whose `cause` comes from the closed taxonomy below (DESIGN.md "The
// stop record"). Gateway, backend, probe, access log and metrics all use this one type; its JSON
// form is the `"cutline"` extension object documented field by field in proto/README.md.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "cutline/base/json_writer.h"
#include "cutline/base/result.h"

namespace cutline::proto {

// The closed taxonomy of stop causes. Append only; the wire names are stable.
enum class Cause : uint8_t {
  kEos,                 // model: end-of-sequence token
  kStopSequence,        // model: a client stop string or stop token matched
  kClientMaxTokens,     // client: the client's own max_tokens was reached
  kGatewayBudget,       // gateway: a policy budget (clamp, pool, adaptive rule) ended it
  kGatewayDeadline,     // gateway: wall-clock deadline from request arrival
  kGatewayTtftTimeout,  // gateway: no first token in time
  kGatewayIdleTimeout,  // gateway: gap between tokens exceeded
  kAdmissionRejected,   // gateway: never admitted (queue full, queue wait exceeded, pool empty)
  kClientCancel,        // client: disconnected or cancelled
  kBackendPreempted,    // backend: aborted a preempted sequence
  kBackendOom,          // backend: out of KV or device memory
  kContextLength,       // backend: the model's context window was reached
  kUpstreamError,       // upstream: error status or error event from upstream
  kUpstreamDisconnect,  // transport: upstream closed without a stop
  kContentFilter,       // model: the upstream's content filter ended it (finish_reason
                        // "content_filter", passed through as sent)
  kInvalidRequest,      // client: refused as malformed before admission (bad JSON, types, limits,
                        // unknown model, request-target)
  kPolicyDenied,        // policy: refused by the operator's policy, not for want of capacity (no
                        // rule serves the request, passthrough: deny, an upstream's operational
                        // path that passthrough_operational does not list)
};
inline constexpr int kCauseCount = 17;

enum class Origin : uint8_t { kModel, kClient, kGateway, kBackend, kUpstream, kTransport, kPolicy };
inline constexpr int kOriginCount = 7;

std::string_view to_string(Cause cause);
std::string_view to_string(Origin origin);
std::optional<Cause> parse_cause(std::string_view name);
Cause cause_at(int index);  // 0 <= index < kCauseCount, for iterating the taxonomy

Origin origin_of(Cause cause);
// True for every cause except eos and stop_sequence: the client does not hold the answer the model
// would have produced. A refusal (admission_rejected, invalid_request, policy_denied) counts: the
// client got no answer at all, and a client that trusts `truncated: false` to mean "this is the
// whole answer" must not be told so.
bool is_truncated(Cause cause);
// A cut made by serving (gateway, backend, upstream, transport, or a client that gave up), as
// opposed to a model stop (content_filter included), the client's own max_tokens, a request
// refused as malformed, or one the policy refuses by design (policy_denied: nothing was queued or
// cut, the operator's rules say no). What cutline_truncations_total counts.
bool is_serving_cut(Cause cause);
// The OpenAI `finish_reason` that a plain client sees by default: "stop" for model stops,
// "content_filter" for content_filter, "length" for everything else (budget and time cuts read as
// "the answer was cut short").
std::string_view default_finish_reason(Cause cause);

// How output_tokens was counted.
enum class CountMethod : uint8_t {
  kUsage,   // from the upstream's usage object (exact)
  kChunks,  // from content deltas, one per chunk (upstream sent no usage)
  kEngine,  // counted by the backend engine itself (exact)
};
std::string_view to_string(CountMethod method);
std::optional<CountMethod> parse_count_method(std::string_view name);

// Time-to-first-token split into phases on the backend's monotonic clock (ms). They add up to
// the backend's TTFT.
struct TtftPhases {
  double queue_ms = 0;         // waiting for admission into the running batch
  double load_ms = 0;          // reading, converting and uploading weights of a non-resident model
  double warmup_ms = 0;        // device context, kernels, KV allocation after a load
  double prefill_ms = 0;       // the forward steps of the prompt's chunks, the last one included
  double first_decode_ms = 0;  // end of that last step -> first token sampled and queued
  bool operator==(const TtftPhases&) const = default;
};

// A cut a policy rule in observe mode (on_cut.mode: observe) would have made but did not: the
// answer went on. One per cause that would have fired, in the order they would have fired.
struct WouldCut {
  Cause cause = Cause::kGatewayBudget;
  std::string rule;  // YAML path of the limit, as StopRecord::rule
  double limit = 0;
  // The value when the limit would have fired (ms or tokens); for deadline, TTFT and idle cuts
  // the value over the whole answer (its duration, TTFT, largest gap), so `observed - limit`
  // says by how much the answer exceeded the limit.
  double observed = 0;
  std::string unit;  // "ms" or "tokens"
  // Output tokens the client had when the cut would have happened (0: before any token, e.g.
  // an admission rejection or a TTFT timeout), and how many it received after that point.
  int64_t at_token = 0;
  int64_t tokens_after = 0;
  bool operator==(const WouldCut&) const = default;
};

struct StopRecord {
  static constexpr int kVersion = 1;

  Cause cause = Cause::kEos;
  // Who wrote this record: "gateway" or "backend".
  std::string reporter;
  // Human-readable detail, e.g. "deadline 30000 ms exceeded after 30004 ms". Empty = absent.
  std::string message;
  std::string request_id;

  // Policy context (gateway): the matched policy's name and the YAML path of the rule or limit
  // that fired ("policies[0].deadline"), with the limit and the value observed when it fired.
  std::string policy;
  std::string rule;
  std::optional<double> limit;
  std::optional<double> observed;
  std::string unit;  // unit of limit/observed: "ms" or "tokens"

  std::optional<int64_t> requested_max_tokens;  // what the client asked for (absent = no limit)
  std::optional<int64_t> effective_max_tokens;  // what was sent upstream after policy
  std::optional<int64_t> input_tokens;
  int64_t output_tokens = 0;
  CountMethod count_method = CountMethod::kUsage;

  // Timings in ms on the reporter's monotonic clock, from request arrival.
  std::optional<double> queue_ms;
  std::optional<double> ttft_ms;
  std::optional<double> itl_mean_ms;
  std::optional<double> itl_max_ms;
  std::optional<double> duration_ms;

  // Backend facts (reported by a Cutline backend, merged by the gateway).
  std::optional<int64_t> preemptions;
  std::optional<int64_t> kv_bytes_peak;
  std::optional<int64_t> device_free_bytes;
  std::optional<TtftPhases> phases;
  std::string model_state;  // "resident" | "cold" | "evicted_then_loaded"; empty = absent

  // The cause the upstream itself reported, when the gateway's own cause differs (e.g. the
  // upstream said eos after the gateway had already cut for a deadline).
  std::optional<Cause> upstream_cause;

  // Upstream pool (gateway): how many endpoints the request was sent to (a retry on another
  // endpoint happens only before the first byte went to the client), which ones ("host:port",
  // in order; the last one served the answer), and whether the request was sent where its model
  // was not resident (it paid a model load). Absent when the gateway did not route it.
  std::optional<int64_t> attempts;
  std::vector<std::string> endpoints;
  std::optional<bool> routed_cold;

  // Observe mode (gateway): the cuts the matched rule would have made. Empty (and absent from
  // the JSON) when the rule enforces or nothing would have been cut.
  std::vector<WouldCut> would_cut;

  Origin origin() const { return origin_of(cause); }
  bool truncated() const { return is_truncated(cause); }
};

// Writes the record as the JSON "cutline" object (the value only, not the key).
void write_stop_record(base::JsonWriter& w, const StopRecord& rec);
std::string stop_record_json(const StopRecord& rec);

// Parses the "cutline" object. Unknown fields are ignored (forward compatibility); a missing or
// unknown cause, or a version other than 1, is an error naming the field.
Result<StopRecord> parse_stop_record(std::string_view json);
Result<StopRecord> parse_stop_record(simdjson::ondemand::object& obj);

// The compact one-line form for the `Cutline-Stop` header and the `cutline-stop` trailer:
// `cause=gateway_deadline; origin=gateway; truncated=true; rule=policies[0].deadline;
//  limit=30000; observed=30004; unit=ms`. Only the fields present are written; values contain
// no ';' ',' or control characters (they are replaced by '_').
std::string stop_header_value(const StopRecord& rec);
// Parses the header form back into cause/rule/limit/observed/unit (other fields stay default).
Result<StopRecord> parse_stop_header(std::string_view value);

}  // namespace cutline::proto
