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
// Non-streaming: the final response object as the body, with a Cutline-Stop header.

#include <cstdint>
#include <optional>
#include <string>

#include "cutline/model/tokenizer.h"
#include "cutline/server/exchange_writer.h"
#include "cutline/server/response_object.h"

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

  ResponsesParams params_;
  const model::Tokenizer& tokenizer_;
  std::string text_;            // the whole output text so far
  std::string logprobs_items_;  // its logprobs, raw JSON items (when requested)
  std::string delta_items_;     // one delta's logprobs
  int64_t sequence_number_ = 0;
  std::string json_;    // the event being written
  std::string frames_;  // SSE frames not yet sent
};

}  // namespace cutline::server
