#pragma once
// The body of POST /v1/responses (OpenAI's Responses API), parsed and validated into what the
// backend serves: text in, text out.
//
//   input         a string (one user message), or an array of messages
//                 {"type"?: "message", "role": "user"|"assistant"|"system"|"developer",
//                  "content": "..." | [{"type": "input_text"|"output_text", "text": "..."}]}
//   instructions  a system message put before the input
//   max_output_tokens, temperature, top_p, stream; top_logprobs (0..20) with
//                 include: ["message.output_text.logprobs"]
//   seed          (an extension, as for chat) the sampling seed, for replayable answers
//   tools, tool_choice, parallel_tool_calls, function_call and function_call_output input items
//                 (responses_tools.h): function calling, as chat completions serves it
//
// Refused with an OpenAI-style 400 naming the field: malformed JSON or invalid UTF-8, a missing
// or mistyped field, values out of range, input items or content parts that are not text or
// function calls (images, files), tools on a model without tool syntax, and
// previous_response_id (this backend keeps no responses). Fields of the API that do not change a
// text answer (store, metadata, user, truncation, text.format "text", ...) are accepted and
// ignored.
//
// Called on a worker loop before the model's lease is taken; pure, no I/O.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/model/chat_template.h"
#include "cutline/server/completion_request.h"
#include "cutline/server/tool_request.h"

namespace cutline::server {

struct ResponsesRequest {
  std::string model;
  // `instructions` (as a system message) first, then the input; "developer" reads as "system".
  std::vector<model::ChatMessage> messages;
  std::optional<std::string> instructions;  // echoed in the response object
  std::optional<int64_t> max_output_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> seed;
  bool stream = false;
  // Logprobs of the output text: -1 none, else this many alternatives per token (they come when
  // `include` has "message.output_text.logprobs" or top_logprobs is set).
  int32_t top_logprobs = -1;
  ToolRequest tools;  // tools, tool_choice, parallel_tool_calls (message_tool_calls unused)
};

// `detail` names the field a refusal is about.
Result<ResponsesRequest> parse_responses_request(std::string_view body, RequestErrorDetail& detail);

// What the engine runs (on a worker loop, with the model's lease held): the messages through the
// model's chat template, as for chat completions, with the sampling fields and the
// max_output_tokens limit. Refusals as build_add_request's (param "input", or "tools" for tools
// on a template without tool syntax). `tool_calls`, when given, says how to read the output.
Result<engine::AddRequest> build_responses_add_request(const ResponsesRequest& request,
                                                       const ModelTextInfo& model,
                                                       std::string request_id,
                                                       RequestErrorDetail& detail,
                                                       ToolCallOptions* tool_calls = nullptr);

}  // namespace cutline::server
