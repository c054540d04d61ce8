#pragma once
// Chunk parser: reads one SSE `data:` payload of an OpenAI-compatible stream (a
// chat.completion.chunk or a text_completion chunk), an error object sent mid-stream, and an
// upstream's own top-level "cutline" stop record. The gateway calls it on every token, so the
// parser object is reused: it keeps simdjson's parser, a padded copy buffer and the ParsedChunk
// (choices vector included), and a typical chunk costs no heap allocation once they have grown.
//
// Accepted error shapes: {"error": {"message", "type", "param", "code"}} (OpenAI, vLLM streams)
// and a top-level {"object": "error", "message", "type", "code"} (vLLM's non-stream errors).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "cutline/base/result.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::proto {

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t total_tokens = 0;
  bool operator==(const Usage&) const = default;
};

// An error object sent by an upstream. Views: see ParsedChunk.
struct UpstreamErrorView {
  std::string_view message;
  std::string_view type;
  std::string_view param;
  std::string_view code;  // a string code, or a numeric code's digits (e.g. "400")
};

// One element of "choices". Views: see ParsedChunk.
struct ChunkChoice {
  int64_t index = 0;
  std::string_view content;        // delta.content (chat) or text (completions), decoded
  bool has_content = false;        // the field is present and a string (possibly empty)
  std::string_view role;           // delta.role, empty when absent
  bool has_tool_calls = false;     // delta.tool_calls present and non-null
  std::string_view finish_reason;  // empty when null or absent
  bool has_finish_reason = false;  // non-null finish_reason
  // The choice holds nothing but the fields above, each once, and no logprobs: what it adds to a
  // whole answer is in them (CompletionAssembler::add(const ParsedChunk&)).
  bool plain = true;
};

// A parsed chunk. The string views point into the ChunkParser's buffers and stay valid until
// its next parse().
struct ParsedChunk {
  std::string_view id;
  std::string_view object;  // "chat.completion.chunk" | "text_completion" | ...
  std::string_view model;
  int64_t created = 0;
  std::vector<ChunkChoice> choices;
  bool choices_plain = true;   // "choices" at most once, every choice plain
  std::optional<Usage> usage;  // present and non-null
  std::optional<UpstreamErrorView> error;
  std::optional<StopRecord> cutline;  // the upstream's own stop record (a Cutline backend)

  // The first choice's content, or empty.
  std::string_view content() const {
    return choices.empty() ? std::string_view() : choices.front().content;
  }
  // The first non-null finish_reason of any choice, or empty.
  std::string_view finish_reason() const;
};

class ChunkParser {
 public:
  // Parses one payload (an SSE event's data, not "[DONE]"). Returns kUpstream errors for
  // malformed JSON or fields of the wrong type, naming the field; a malformed "cutline" object is
  // an error too (a Cutline backend must send a valid one).
  Status parse(std::string_view data);
  const ParsedChunk& chunk() const { return chunk_; }

 private:
  simdjson::ondemand::parser parser_;
  std::string padded_;
  ParsedChunk chunk_;
};

}  // namespace cutline::proto
