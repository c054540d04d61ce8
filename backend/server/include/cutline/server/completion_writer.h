#pragma once
// CompletionWriter: the ExchangeWriter of /v1/chat/completions and /v1/completions. Streaming:
// SSE chunks (the chat role chunk first), the last chunk with finish_reason and the `cutline`
// record, the usage chunk when stream_options.include_usage, [DONE], the cutline-stop trailer.
// Non-streaming: one chat.completion / text_completion body with the record and a Cutline-Stop
// header. With logprobs requested, every content chunk (and the body's choice) carries
// choices[].logprobs in the endpoint's shape (logprobs_writer.h).

#include <cstdint>
#include <optional>
#include <string>

#include "cutline/model/tokenizer.h"
#include "cutline/proto/openai_request.h"
#include "cutline/server/exchange_writer.h"
#include "cutline/server/logprobs_writer.h"

namespace cutline::server {

struct CompletionParams {
  proto::Endpoint endpoint = proto::Endpoint::kChatCompletions;
  bool stream = false;
  bool include_usage = false;
  std::string model;
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::optional<int64_t> requested_max_tokens;
  int64_t arrival_us = 0;  // steady clock, when the request was complete
  bool logprobs = false;   // choices[].logprobs requested (the engine sends TokenLogprobs)
};

class CompletionWriter final : public ExchangeWriter {
 public:
  // `tokenizer` (the model's, held by the exchange's lease) spells the logprobs' tokens.
  CompletionWriter(CompletionParams params, const model::Tokenizer& tokenizer);

  void start(proto::ServerStream& http) override;
  void text(proto::ServerStream& http, std::string_view text,
            std::span<const engine::TokenLogprobs> logprobs) override;
  void finish(proto::ServerStream& http, const proto::StopRecord& stop,
              const engine::SequenceRecord& record) override;

 private:
  bool chat() const { return params_.endpoint == proto::Endpoint::kChatCompletions; }
  // The logprobs object of `logprobs` (streaming: per chunk) or of everything collected.
  std::string logprobs_object(std::span<const engine::TokenLogprobs> logprobs);
  void finish_stream(proto::ServerStream& http, const proto::StopRecord& stop,
                     const engine::SequenceRecord& record);

  CompletionParams params_;
  const model::Tokenizer& tokenizer_;
  std::string text_;            // non-streaming: the whole answer
  std::string scratch_;         // reused for chunk JSON and SSE frames
  std::string chat_items_;      // chat logprobs items (non-streaming: all; streaming: a chunk's)
  CompletionLogprobs columns_;  // completions logprobs
};

}  // namespace cutline::server
