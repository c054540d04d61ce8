#pragma once
// ResponsesWriter: the ExchangeWriter of POST /v1/responses.
//
// Streaming (SSE, each frame "event: <type>" + "data: {...}", every payload with "type" and a
// "sequence_number" counting from 0), in the order OpenAI's API reference defines:
//   response.created, response.in_progress            (the response object, status in_progress)
//   response.output_item.added                        (the assistant message, no content yet)
//   response.content_part.added                       (an empty output_text part)
//   response.output_text.delta ...                    (the text as it is sampled)
//   response.output_text.done, response.content_part.done, response.output_item.done
//   response.completed | response.incomplete          (the final object: output, usage, cutline)
// A model runner failure ends with response.failed instead of the three .done events. The
// cutline-stop trailer follows, as for chat.
// With tool calling (ResponsesParams::tools.parse), text goes through a ToolCallParser; the
// first call closes the message (its three .done events), then each call is an item of its own
// at output_index 1, 2, ...: response.output_item.added (function_call, arguments ""),
// response.function_call_arguments.delta (the whole arguments), .._arguments.done,
// response.output_item.done. Text after a call is in the final object's message only.
// Non-streaming: the final response object as the body, with a Cutline-Stop header.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cutline/model/tokenizer.h"
#include "cutline/server/exchange_writer.h"
#include "cutline/server/response_object.h"
#include "cutline/server/tool_call_parser.h"
#include "cutline/server/tool_request.h"

namespace cutline::server {

struct ResponsesParams {
  std::string id;       // "resp_..."
  std::string item_id;  // "msg_..."
  std::string model;
  int64_t created_at = 0;  // unix seconds
  bool stream = false;
  // Echoed in the response object.
  std::optional<std::string> instructions;
  std::optional<int64_t> max_output_tokens;
  double temperature = 1.0;
  double top_p = 1.0;
  int32_t top_logprobs = -1;  // -1: no logprobs
  ToolCallOptions tools;
  // Each function call's call_id; unset: "call_" and 24 random letters and digits.
  std::function<std::string()> make_call_id;
};

class ResponsesWriter final : public ExchangeWriter {
 public:
  ResponsesWriter(ResponsesParams params, const model::Tokenizer& tokenizer);

  void start(proto::ServerStream& http) override;
  void text(proto::ServerStream& http, std::string_view text,
            std::span<const engine::TokenLogprobs> logprobs) override;
  void finish(proto::ServerStream& http, const proto::StopRecord& stop,
              const engine::SequenceRecord& record) override;

 private:
  // The response object's fields as they stand (status, text and usage filled at the end).
  ResponseObjectFields object_fields() const;
  // Appends one SSE frame to frames_: {"type","sequence_number", <body(writer)>}.
  template <class Body>
  void emit(std::string_view type, Body&& body);
  void send_frames(proto::ServerStream& http);
  // Streaming: the message item's three .done events (once).
  void close_message(std::string_view status);
  void emit_call(const ParsedToolCall& call);

  ResponsesParams params_;
  const model::Tokenizer& tokenizer_;
  std::string text_;            // the whole output text so far
  std::string logprobs_items_;  // its logprobs, raw JSON items (when requested)
  std::string delta_items_;     // one delta's logprobs
  int64_t sequence_number_ = 0;
  std::string json_;                           // the event being written
  std::string frames_;                         // SSE frames not yet sent
  std::optional<ToolCallParser> tool_parser_;  // set when params_.tools.parse
  std::vector<ParsedToolCall> calls_;          // the calls read so far
  bool message_closed_ = false;                // streaming: the message's .done events sent
};

}  // namespace cutline::server
