#pragma once
// RequestRecord: everything the probe records about one request, on the probe's one monotonic
// clock (ms since the run started). Filled by the runner from the response stream and, when the
// endpoint sends one, the `cutline` stop record; otherwise the stop cause is derived from what a
// plain OpenAI client sees (finish_reason, HTTP status, transport errors).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/proto/wire/stop_record.h"

namespace cutline::tools::probe {

// Where `cause` came from.
enum class CauseSource { kCutline, kDerived };
std::string_view to_string(CauseSource source);

// Probe-only derived labels for ends the OpenAI response alone cannot attribute. Every other
// derived cause is a taxonomy name (proto/stop_record.h).
inline constexpr std::string_view kLengthBelowMax = "length_below_max";  // "length" < max_tokens
inline constexpr std::string_view kNoFinishReason = "no_finish_reason";  // [DONE], no reason

struct RequestRecord {
  // What was asked.
  std::string run;  // "load" or a switch scenario name
  int concurrency = 1;
  int sequence = 0;  // order of issue within the run
  int prompt_index = 0;
  std::string prompt_name;  // "short", "medium", "long", or "file:N"
  int repeat = 0;
  std::optional<int64_t> seed;
  std::string model;
  std::optional<int64_t> max_tokens_requested;

  // What came back.
  int http_status = 0;        // 0 = no response head
  std::string finish_reason;  // empty = none seen
  int64_t output_tokens = 0;
  std::string count_method;  // "usage" | "chunks" | a cutline record's method
  std::string cause;         // taxonomy name or a probe-only label above
  CauseSource cause_source = CauseSource::kDerived;
  bool truncated = false;   // the answer is not what the model would have produced
  bool model_stop = false;  // eos or stop_sequence
  std::string policy;       // from the cutline object
  std::string rule;
  std::optional<double> limit;
  std::optional<double> observed;
  std::string unit;
  std::string transport_error;  // ClientErrorKind label, empty when none
  bool client_timeout = false;  // the probe's --timeout fired and it disconnected
  std::string error;            // human-readable error (status body message, transport message)

  // Timing on the probe's clock (ms since the run started) and from the endpoint.
  double start_ms = 0;
  double end_ms = 0;
  std::optional<double> ttft_ms;         // client side: request sent -> first content
  std::vector<double> itl_ms;            // client side: gaps between content chunks
  std::optional<double> queue_ms;        // endpoint-reported (cutline object)
  std::optional<double> server_ttft_ms;  // endpoint-reported
  std::optional<int64_t> preemptions;
  std::optional<int64_t> kv_bytes_peak;
  std::optional<int64_t> device_free_bytes;
  std::optional<proto::TtftPhases> phases;
  std::string model_state;
  std::string reporter;  // who wrote the cutline object ("gateway" | "backend"), empty = none

  // Output identity: FNV-1a 64 of the content, hex. The text itself stays in memory only (used
  // to check that a shorter answer is a prefix of the longer one).
  std::string content_hash;
  std::string content;

  double duration_ms() const { return end_ms - start_ms; }
  std::optional<double> itl_mean_ms() const;
  std::optional<double> itl_max_ms() const;
};

// Hex FNV-1a 64 of `text`.
std::string content_hash(std::string_view text);

// Fills cause, cause_source, truncated and model_stop from a stop record the endpoint sent.
void apply_stop_record(RequestRecord& r, const proto::StopRecord& rec);
// Fills them when no stop record came: from the transport error, the client timeout, the HTTP
// status, and finish_reason against max_tokens requested.
void derive_cause(RequestRecord& r, bool saw_done);

}  // namespace cutline::tools::probe
