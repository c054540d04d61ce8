#pragma once
// The Responses API's response object ({"object":"response", ...}) as the backend writes it: in
// the body of a non-streaming POST /v1/responses and inside the response.created,
// response.in_progress, response.completed / response.incomplete / response.failed events.
// The output is an assistant message with one output_text part, then the function calls (if
// tool calling read any out of the text). At the end it carries
// usage and the top-level `cutline` stop record, as chat completions do.
//
// How a stop cause becomes a status (response_outcome): eos and stop_sequence are "completed";
// every other cause is "incomplete", with incomplete_details.reason "max_output_tokens" for the
// length limits (client_max_tokens, gateway_budget, context_length) and "content_filter" for
// content_filter (the API names no other reason: elsewhere it is null and the record says why);
// a model runner failure is "failed" with an error.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cutline/base/json_writer.h"
#include "cutline/proto/wire/stop_record.h"
#include "cutline/server/tool_call_parser.h"

namespace cutline::server {

struct ResponseOutcome {
  std::string_view status;  // "completed" | "incomplete" | "failed"
  std::optional<std::string_view> incomplete_reason;
};
ResponseOutcome response_outcome(proto::Cause cause, bool runner_error);

struct ResponseUsage {
  int64_t input_tokens = 0;
  int64_t cached_tokens = 0;  // input tokens served from the prefix cache
  int64_t output_tokens = 0;
};

struct ResponseObjectFields {
  std::string_view id;  // "resp_..."
  int64_t created_at = 0;
  std::string_view model;
  std::string_view status = "in_progress";
  std::optional<std::string_view> incomplete_reason;
  std::optional<std::string_view> error_message;  // status "failed"
  // Request echo.
  std::optional<std::string_view> instructions;
  std::optional<int64_t> max_output_tokens;
  double temperature = 1.0;
  double top_p = 1.0;
  std::optional<int32_t> top_logprobs;
  // The output message (absent: "output":[]).
  std::string_view item_id;  // "msg_..."
  const std::string* text = nullptr;
  // Raw JSON items of the output_text part's logprobs (comma-joined), when requested.
  const std::string* logprobs_items = nullptr;
  // Function calls read out of the output, as function_call items after the message.
  const std::vector<ParsedToolCall>* calls = nullptr;
  const ResponseUsage* usage = nullptr;  // "usage": null when unset
  const proto::StopRecord* cutline = nullptr;
};
void write_response_object(base::JsonWriter& w, const ResponseObjectFields& f);

// The output message item {"id","type":"message","status","role":"assistant","content":[...]}
// with no part (`text` null) or one output_text part.
void write_output_message(base::JsonWriter& w, std::string_view item_id, std::string_view status,
                          const std::string* text, const std::string* logprobs_items);
// {"id":"fc_...","type":"function_call","status","call_id","name","arguments"}
void write_function_call_item(base::JsonWriter& w, const ParsedToolCall& call,
                              std::string_view status);
// The function_call item's id for a call ("fc_" and the call id's random part).
std::string function_call_item_id(const ParsedToolCall& call);
// {"type":"output_text","text","annotations":[],"logprobs":[...]?}
void write_output_text_part(base::JsonWriter& w, std::string_view text,
                            const std::string* logprobs_items);

}  // namespace cutline::server
