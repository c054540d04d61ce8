#pragma once
// CompletionWriter: the ExchangeWriter of /v1/chat/completions and /v1/completions. Streaming:
// SSE chunks (the chat role chunk first), the last chunk with finish_reason and the `cutline`
// record, the usage chunk when stream_options.include_usage, [DONE], the cutline-stop trailer.
// Non-streaming: one chat.completion / text_completion body with the record and a Cutline-Stop
// header. With logprobs requested, every content chunk (and the body's choice) carries
// choices[].logprobs in the endpoint's shape (logprobs_writer.h).
//
// Tool calls (chat, CompletionParams::tools.parse): the text goes through a ToolCallParser.
// Streaming: content before a <tool_call> streams as content deltas; each call, once its block
// closed, goes out as two chunks, delta.tool_calls [{index, id, type, function: {name,
// arguments: ""}}] then [{index, function: {arguments}}]. Non-streaming: message.tool_calls,
// content the text outside the calls (null when none). finish_reason is "tool_calls" when calls
// were returned and the model stopped on its own (eos, stop sequence); the stop record keeps the
// engine's cause.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cutline/model/tokenizer.h"
#include "cutline/proto/wire/openai_chunk.h"
#include "cutline/proto/wire/openai_request.h"
#include "cutline/server/exchange_writer.h"
#include "cutline/server/logprobs_writer.h"
#include "cutline/server/tool_call_parser.h"
#include "cutline/server/tool_request.h"

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
  ToolCallOptions tools;   // chat only
  // Each tool call's id; unset: "call_" and 24 random letters and digits.
  std::function<std::string()> make_call_id;
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
  // Streaming: one content chunk (skipped when empty and without logprobs), one call's chunks.
  void send_content(proto::ServerStream& http, std::string_view text,
                    std::span<const engine::TokenLogprobs> logprobs);
  void send_tool_call(proto::ServerStream& http, const ParsedToolCall& call);
  // "tool_calls" when calls were returned and the model ended the answer, else the cause's.
  std::string_view finish_reason(const proto::StopRecord& stop) const;
  // Non-streaming with calls: the chat.completion body with message.tool_calls.
  std::string tool_calls_body(const proto::StopRecord& stop, const proto::Usage& usage);

  CompletionParams params_;
  const model::Tokenizer& tokenizer_;
  std::string text_;            // non-streaming: the whole answer
  std::string scratch_;         // reused for chunk JSON and SSE frames
  std::string chat_items_;      // chat logprobs items (non-streaming: all; streaming: a chunk's)
  CompletionLogprobs columns_;  // completions logprobs
  std::optional<ToolCallParser> tool_parser_;  // set when params_.tools.parse
  std::vector<ParsedToolCall> calls_;          // non-streaming: the calls of the whole answer
};

}  // namespace cutline::server
