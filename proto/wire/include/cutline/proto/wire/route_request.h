#pragma once
// Requests of the OpenAI routes the gateway runs besides chat and completions: /v1/responses and
// /v1/embeddings. What the gateway needs from them (model, stream, max_output_tokens) is read
// with simdjson while the whole document is validated (malformed JSON, invalid UTF-8, wrong
// types, trailing bytes: a kBadRequest error naming the field); and, like request_rewriter.h,
// the body is changed only at the byte ranges of the fields the gateway sets (every other byte
// kept as the client sent it).
//
//   /v1/responses   "model" (string, required), "input" (required: a string or an array),
//                   "stream" (bool), "max_output_tokens" (1..kMaxTokensLimit or null)
//   /v1/embeddings  "model" (string, required), "input" (required: a string or an array)

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/proto/wire/openai_request.h"

namespace cutline::proto {

enum class RouteKind : uint8_t { kResponses, kEmbeddings };

struct RouteRequest {
  RouteKind kind = RouteKind::kResponses;
  std::string model;
  bool stream = false;
  std::optional<int64_t> max_output_tokens;  // responses only
  // Embeddings: the input's tokens as estimated before any tokenizer saw them, for the token
  // pools: a string counts ceil(bytes / 4) of its text (English averages about 4 bytes a
  // token), a token id one token, and an array the sum of its elements. At least 1; saturates
  // rather than wraps (it cannot come near: the body is bounded).
  int64_t input_tokens_estimate = 0;
  // Byte ranges (into the parsed body) of the values the rewriter may replace.
  size_t object_open = 0;
  bool object_empty = false;
  std::optional<ByteRange> max_output_tokens_token;
  std::optional<ByteRange> stream_token;
};

// Parses and validates `body` (copied once into a padded buffer).
Result<RouteRequest> parse_route_request(RouteKind kind, std::string_view body);

// /v1/responses: the body with max_output_tokens set to `max_output_tokens` (replaced, or
// inserted after '{'; unchanged when nullopt) and, with force_stream, "stream": true.
std::string rewrite_responses_request(std::string_view body, const RouteRequest& req,
                                      std::optional<int64_t> max_output_tokens, bool force_stream);

}  // namespace cutline::proto
