#pragma once
// OpenAI request parsing: reads a /v1/chat/completions or /v1/completions body with simdjson
// On-Demand, without copying it (parse_in_place) or with one copy into a reused padded buffer
// (parse), and validates it well enough to answer a bad request with a 400 whose message names
// the field ("max_tokens must be a positive integer, got -5").
//
// Who calls it: the gateway (classify/decide: model, stream, requested max_tokens; then the
// rewriter splices at the byte ranges recorded here) and the backend server (every sampling field
// and the decoded messages/prompt).
//
// Validation: the whole document is walked once (unknown fields too), so malformed JSON anywhere,
// invalid UTF-8 (simdjson validates it) and trailing bytes after the object are rejected. Top-level
// keys that Cutline reads may appear only once (a duplicate "max_tokens" could otherwise bypass a
// clamp on an upstream that keeps the last one).
//
// Lifetime: a ParsedRequest refers to the body by offsets (ByteRange) and keeps a view of it;
// the body must outlive the accessors that decode text (message_text, prompt_text, raw).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "cutline/base/result.h"

namespace cutline::proto {

enum class Endpoint : uint8_t {
  kChatCompletions,  // POST /v1/chat/completions: "messages"
  kCompletions,      // POST /v1/completions: "prompt"
};
std::string_view to_string(Endpoint endpoint);  // "chat.completions" | "completions"

// [begin, end) byte offsets into the request body.
struct ByteRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
  bool operator==(const ByteRange&) const = default;
};

// Largest max_tokens / max_completion_tokens accepted; anything above is a client error.
inline constexpr int64_t kMaxTokensLimit = 1'000'000;
// Largest n / best_of accepted (OpenAI's own limit on n); anything above is a client error. With
// kMaxTokensLimit it bounds what one request can ask a token pool for (1.28e8 tokens), far from
// any overflow of the arithmetic that multiplies them.
inline constexpr int64_t kMaxChoices = 128;

// One element of "messages".
struct ChatMessage {
  enum class ContentKind : uint8_t {
    kAbsent,  // no "content" key (e.g. an assistant message with tool_calls)
    kNull,    // "content": null
    kString,  // "content": "..."
    kParts,   // "content": [{"type":"text","text":"..."}, {"type":"image_url",...}]
  };
  ByteRange role;  // the raw JSON string token, quotes included
  ContentKind content_kind = ContentKind::kAbsent;
  // Text pieces of the content in ParsedRequest::text_parts: one for kString, one per
  // {"type":"text"} part for kParts.
  uint32_t first_part = 0;
  uint32_t part_count = 0;
  bool has_non_text_parts = false;  // kParts with image/audio/other parts
  bool has_tool_calls = false;      // "tool_calls" present and non-empty
};

// What the prompt of a /v1/completions request holds.
enum class PromptKind : uint8_t {
  kAbsent,        // chat requests
  kString,        // "prompt": "..."
  kStrings,       // "prompt": ["...", "..."] (one completion per element)
  kTokens,        // "prompt": [1, 2, 3]
  kTokenBatches,  // "prompt": [[1, 2], [3]]
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string_view body;  // the parsed body (not owned)

  std::string model;
  std::vector<ChatMessage> messages;  // chat: every element of "messages" (at least one)
  PromptKind prompt_kind = PromptKind::kAbsent;
  std::vector<ByteRange> prompts;      // completions kString/kStrings: raw string tokens
  std::vector<int64_t> prompt_tokens;  // completions kTokens (kTokenBatches: not kept)
  // Raw JSON string tokens (quotes included) of every text piece: message contents (see
  // ChatMessage::first_part) .
  std::vector<ByteRange> text_parts;

  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::optional<int64_t> max_tokens;
  std::optional<int64_t> max_completion_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> min_p;
  std::optional<double> presence_penalty;
  std::optional<double> frequency_penalty;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> seed;
  std::vector<std::string> stop;  // "stop": a string or an array of strings, decoded
  int64_t n = 1;                  // > 1 is allowed here; a caller that cannot serve it says so
  int64_t best_of = 1;            // completions: candidates generated server-side (>= n)
  std::string user;
  bool has_tools = false;  // "tools" present and non-empty

  // Where the rewriter may splice. Offsets into `body`.
  struct Anchors {
    size_t object_open = 0;     // the top-level '{'
    bool object_empty = false;  // the top-level object has no members
    // Value tokens (null included) of the fields the rewriter changes, when the key is present.
    std::optional<ByteRange> max_tokens;
    std::optional<ByteRange> max_completion_tokens;
    std::optional<ByteRange> stream;
    // "stream_options": the whole value when it is null; for an object see stream_options_open.
    std::optional<ByteRange> stream_options;
    std::optional<size_t> stream_options_open;  // the object's '{'
    bool stream_options_empty = false;          // the object has no members
    std::optional<ByteRange> include_usage;     // value token of stream_options.include_usage
  } anchors;

  // The limit the client asked for: max_completion_tokens when present, else max_tokens (what
  // OpenAI and vLLM do). nullopt = no limit given.
  std::optional<int64_t> requested_max_tokens() const {
    return max_completion_tokens ? max_completion_tokens : max_tokens;
  }

  // How many completions the upstream generates for this request (each up to the max tokens):
  // max(n, best_of). Budgets reserve and count across all of them.
  int64_t choices() const { return n > best_of ? n : best_of; }

  std::string_view raw(ByteRange r) const { return body.substr(r.begin, r.size()); }
  // Decoded (unescaped) strings; these copy, and only when called.
  std::string message_role(size_t i) const;
  // The message's text: its string content, or its text parts concatenated with no separator.
  std::string message_text(size_t i) const;
  void append_message_text(size_t i, std::string& out) const;
  std::string prompt_text(size_t i) const;  // i < prompts.size()
};

// Reusable parser: keeps simdjson's parser and a padded copy buffer between requests. Not
// thread-safe; one per worker thread.
class RequestParser {
 public:
  // Parses a body that lives elsewhere (copied once into the reused padded buffer). The body must
  // outlive the result (offsets and `body` view refer to it).
  Result<ParsedRequest> parse(std::string_view body, Endpoint endpoint);
  // Parses in place: grows body's capacity by simdjson's padding if needed (a reallocation at
  // most, no extra copy when the capacity is already there) and parses the bytes where they are.
  Result<ParsedRequest> parse_in_place(std::string& body, Endpoint endpoint);

 private:
  Result<ParsedRequest> parse_padded(std::string_view body, size_t capacity, Endpoint endpoint);

  simdjson::ondemand::parser parser_;
  std::string padded_;
};

// One-shot convenience (allocates a parser; fine for tools and tests, not for a hot path).
Result<ParsedRequest> parse_openai_request(std::string_view body, Endpoint endpoint);

}  // namespace cutline::proto
