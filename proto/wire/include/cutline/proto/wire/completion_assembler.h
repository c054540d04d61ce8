#pragma once
// CompletionAssembler: turns the stream chunks of one response back into the choices of a whole
// (non-streaming) response. The gateway always streams from the upstream; when the client did not
// ask for a stream it feeds every chunk here and writes the JSON response itself
// (write_completion with CompletionFields::choices), so nothing the upstream said is lost:
//   - every choice (n > 1), by its index, in index order;
//   - chat: delta.role, content, reasoning_content (vLLM, DeepSeek), refusal, tool_calls (merged
//     by tool-call index: id, type and function.name from the first delta that has them,
//     function.arguments concatenated), the legacy function_call, and logprobs.content items;
//   - completions: text;
//   - each choice's own finish_reason.
// Not assembled: completions-endpoint logprobs (a different, column-wise layout).
//
// Not on the per-token path of streaming clients. Threading: one assembler per response.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/proto/wire/openai_chunk.h"

namespace cutline::proto {

struct AssembledToolCall {
  int64_t index = 0;
  std::string id;
  std::string type;  // "function" when the upstream did not say
  std::string name;
  std::string arguments;
};

struct AssembledChoice {
  int64_t index = 0;
  std::string role;  // "assistant" when the upstream did not say
  std::string content;
  bool has_content = false;  // a content (or text) string arrived, possibly empty
  std::string reasoning_content;
  std::string refusal;
  bool has_refusal = false;
  std::vector<AssembledToolCall> tool_calls;  // by index
  std::string function_call_name;             // legacy function_call
  std::string function_call_arguments;
  bool has_function_call = false;
  std::string logprobs_items;  // the logprobs.content array's items as raw JSON, comma-joined
  std::string finish_reason;   // empty: none arrived
};

class CompletionAssembler {
 public:
  CompletionAssembler();
  ~CompletionAssembler();
  CompletionAssembler(const CompletionAssembler&) = delete;
  CompletionAssembler& operator=(const CompletionAssembler&) = delete;

  // Adds one chunk (the data of an SSE event, not [DONE]). A chunk that is not a JSON object, or
  // whose choices are malformed, is an error (kUpstream) and changes nothing.
  Status add(std::string_view chunk_json);
  // Adds a chunk the ChunkParser has read, without parsing it again; only for a chunk whose
  // choices are all plain (ParsedChunk::choices_plain): what else a chunk may carry (tool calls,
  // reasoning, logprobs, ...) needs add(chunk_json).
  Status add(const ParsedChunk& chunk);

  // The choices so far, sorted by index.
  const std::vector<AssembledChoice>& choices() const { return choices_; }

 private:
  AssembledChoice& choice(int64_t index);

  std::vector<AssembledChoice> choices_;
};

}  // namespace cutline::proto
