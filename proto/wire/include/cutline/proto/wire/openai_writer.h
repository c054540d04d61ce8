#pragma once
// OpenAI writers: the JSON Cutline itself sends in OpenAI's shapes: stream chunks
// (chat.completion.chunk, text_completion), whole non-streaming responses (chat.completion,
// text_completion), and the patch the gateway applies to an upstream's last chunk (inject the
// top-level "cutline" stop record, replace finish_reason). All append to a caller-owned buffer;
// SSE framing is sse_writer.h's job.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/proto/wire/completion_assembler.h"
#include "cutline/proto/wire/openai_chunk.h"
#include "cutline/proto/wire/openai_request.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::proto {

// One stream chunk. Chat: {"id","object":"chat.completion.chunk","created","model",
// "choices":[{"index":0,"delta":{"role"?,"content"?},"finish_reason":...}],"usage"?,"cutline"?}.
// Completions: {"id","object":"text_completion","created","model",
// "choices":[{"index":0,"text":"...","finish_reason":...}],"usage"?,"cutline"?}.
struct ChunkFields {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string_view id;
  int64_t created = 0;  // unix seconds
  std::string_view model;
  std::string_view role;  // chat: written in the delta when non-empty (the first chunk)
  std::optional<std::string_view> content;        // chat: delta.content when set; completions: text
                                                  // ("" when unset)
  std::optional<std::string_view> finish_reason;  // null when unset
  // A chunk with no choices (choices: []), e.g. the usage-only chunk OpenAI sends last when
  // include_usage is set.
  bool no_choices = false;
  const Usage* usage = nullptr;         // "usage" when set
  const StopRecord* cutline = nullptr;  // top-level "cutline" when set
};
void write_chunk(std::string& out, const ChunkFields& fields);

// A whole non-streaming response: chat.completion with choices[i].message{role, content,
// tool_calls, ...}, or text_completion with choices[i].text. Without `choices` (or with none
// assembled), one choice 0 with `content`.
struct CompletionFields {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string_view id;
  int64_t created = 0;
  std::string_view model;
  std::string_view content;
  // Choice 0's finish_reason (the gateway's: a cut replaces the upstream's); another choice keeps
  // its own, or takes this one when it has none (it was cut too).
  std::string_view finish_reason = "stop";
  const Usage* usage = nullptr;
  const StopRecord* cutline = nullptr;
  // What the CompletionAssembler rebuilt from the stream (completion_assembler.h).
  const std::vector<AssembledChoice>* choices = nullptr;
};
void write_completion(std::string& out, const CompletionFields& fields);

// Changes to an upstream chunk (the gateway's last chunk before [DONE]).
struct ChunkPatch {
  // Replaces the top-level "cutline" value when present, else inserted first in the object.
  const StopRecord* cutline = nullptr;
  // Replaces every choice's finish_reason (null or not); inserted into a choice without one.
  std::optional<std::string_view> finish_reason;
};
// Writes `chunk_json` with the patch applied into `out` (cleared first); every other byte is kept.
// Fails (kUpstream) when chunk_json is not a JSON object or its choices are malformed.
Status patch_chunk(std::string_view chunk_json, const ChunkPatch& patch, std::string& out);

}  // namespace cutline::proto
