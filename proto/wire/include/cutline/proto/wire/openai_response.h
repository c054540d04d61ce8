#pragma once
// Non-streaming response parser: reads a whole chat.completion or text_completion body (the
// probe's non-streaming runs, the gateway's non-streaming relay, tests). Not on a per-token path,
// so the result owns its strings.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/proto/wire/openai_chunk.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::proto {

struct UpstreamError {
  std::string message;
  std::string type;
  std::string param;
  std::string code;  // a string code, or a numeric code's digits
};

struct ParsedCompletion {
  std::string id;
  std::string object;  // "chat.completion" | "text_completion"
  std::string model;
  int64_t created = 0;
  size_t choice_count = 0;
  // choices[0]: message.content (chat) or text (completions); role; finish_reason.
  std::string content;
  bool has_content = false;  // false when content is null/absent (e.g. tool calls only)
  std::string role;
  std::string finish_reason;  // empty when null
  bool has_tool_calls = false;
  std::optional<Usage> usage;
  std::optional<StopRecord> cutline;
  std::optional<UpstreamError> error;  // an error body instead of a completion
};

// Parses the body. Malformed JSON or wrong types are kUpstream errors naming the field. An error
// body ({"error":{...}} or {"object":"error",...}) parses successfully with `error` set.
Result<ParsedCompletion> parse_completion_response(std::string_view body);

}  // namespace cutline::proto
