#pragma once
// ResponsesRelay: the relay phase of /v1/responses (the Responses API), I/O-free like Relay. The
// upstream always streams (the gateway sets "stream": true); each SSE event is read for its type
// and sequence_number, content deltas are counted and timed, and:
//   - a streaming client gets every event as it came (types the gateway does not know
//     included), except the terminal one (response.completed, response.incomplete,
//     response.failed), which is held until the end and gets the stop record as
//     response.cutline (replacing the one a Cutline backend wrote there, whose facts the
//     gateway's record takes over: one record per answer, always the gateway's);
//   - a non-streaming client gets the terminal event's response object, with the record.
// When the gateway cuts (a timer, shutdown) or the upstream ended without a terminal event, the
// end is the Responses API's own: a response.incomplete event whose response has status
// "incomplete", incomplete_details.reason "max_output_tokens" when the cut was a token budget
// (null otherwise), usage when known, and the record (preceded by response.created when the
// client saw no event yet, so that SDK stream helpers have their snapshot). Usage is counted
// exactly from the terminal event's response.usage; without one, one token per delta event.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "cutline/base/result.h"
#include "cutline/gateway/relay.h"
#include "cutline/gateway/stop_classifier.h"
#include "cutline/gateway/token_timing.h"
#include "cutline/proto/sse/sse_parser.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {

struct ResponsesRelayOptions {
  bool client_stream = true;
  std::string fallback_id;  // for a response object the gateway writes before any arrived
  std::string fallback_model;
};

class ResponsesRelay {
 public:
  explicit ResponsesRelay(ResponsesRelayOptions options);

  Result<FeedResult> feed(std::string_view bytes, int64_t now_ns, TokenTiming& timing,
                          std::string& out);
  UpstreamEnd upstream_end(bool transport_closed) const;
  bool upstream_done() const { return done_; }
  bool has_terminal() const { return !terminal_type_.empty(); }
  const std::string& error_message() const { return error_message_; }
  int64_t output_tokens() const { return usage_output_ ? *usage_output_ : deltas_; }
  proto::CountMethod count_method() const {
    return usage_output_ ? proto::CountMethod::kUsage : proto::CountMethod::kChunks;
  }
  std::optional<int64_t> input_tokens() const { return usage_input_; }
  // The record a Cutline backend put in its terminal response object, when it sent one.
  const proto::StopRecord* backend_record() const {
    return backend_record_ ? &*backend_record_ : nullptr;
  }

  // The end for the client (appended to `out`). `gateway_cut`: the gateway ended the response
  // (its own response.incomplete); otherwise the upstream's terminal event with the record.
  void write_end(const proto::StopRecord& record, bool gateway_cut, std::string& out);
  // on_cut.mode error, streaming: an error event carrying the record.
  void write_error_event(const Error& error, const proto::StopRecord& record, std::string& out);

 private:
  Status on_event(const proto::SseEvent& event, int64_t now_ns, TokenTiming& timing,
                  std::string& out);
  Status read_response(simdjson::ondemand::object response);
  void write_response_object(const proto::StopRecord& record, std::string& out) const;

  ResponsesRelayOptions options_;
  proto::SseParser sse_;
  simdjson::ondemand::parser parser_;
  std::string padded_;
  std::string id_;
  std::string model_;
  int64_t created_at_ = 0;
  int64_t sequence_ = -1;  // the last sequence_number seen
  bool relayed_any_ = false;
  int64_t deltas_ = 0;
  std::string text_;           // non-streaming clients: the output text so far (for a gateway cut)
  std::string terminal_type_;  // "" until the terminal event
  std::string terminal_data_;
  std::string finish_reason_;  // stop | length | content_filter | the upstream's reason
  std::optional<int64_t> usage_input_;
  std::optional<int64_t> usage_output_;
  std::optional<proto::StopRecord> backend_record_;
  bool done_ = false;
  bool error_event_ = false;
  std::string error_message_;
};

// [begin, end) of the value of top-level key `key` in the JSON object `json` (scanned, not
// parsed: strings and nesting respected); nullopt when absent or not an object.
std::optional<std::pair<size_t, size_t>> top_level_object(std::string_view json,
                                                          std::string_view key);

}  // namespace cutline::gateway
