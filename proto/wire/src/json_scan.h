#pragma once
// Private helpers shared by the simdjson-based parsers of proto/ (request, chunk, response,
// error body, chunk patch): byte offsets of tokens, full validation of skipped values, and
// readable type names for error messages.

#include <cstddef>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "cutline/proto/wire/openai_chunk.h"

namespace cutline::proto::json_scan {

inline bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// raw_json_token() includes the whitespace up to the next token; this drops it.
inline std::string_view trim_token(std::string_view token) {
  while (!token.empty() && is_json_space(token.back())) token.remove_suffix(1);
  return token;
}

// The value's token (a scalar's full text; for an array or object only its opening bracket),
// without trailing whitespace. Empty on error.
inline std::string_view token_of(simdjson::ondemand::value& v) {
  return trim_token(v.raw_json_token());
}

// True when the value is JSON null (a failed check leaves the value unread).
inline bool is_null(simdjson::ondemand::value& v) {
  bool null = false;
  return v.is_null().get(null) == simdjson::SUCCESS && null;
}

// "string", "number", "object", "array", "boolean", "null" (or "invalid").
std::string_view type_name(simdjson::ondemand::value& v);

// True when `token` is a JSON number by RFC 8259's grammar.
bool is_json_number(std::string_view token);

// Walks the whole value, checking every scalar (strings unescaped, numbers by the grammar,
// literals) so that malformed JSON inside fields nobody reads is still rejected. max_depth
// bounds the recursion.
simdjson::error_code validate_value(simdjson::ondemand::value v, int max_depth = 256);

// After the root value was consumed: SUCCESS when nothing but whitespace follows it.
simdjson::error_code check_end(simdjson::ondemand::document& doc);

// Reads a string-or-number-or-null scalar as text: a string unescaped, a number as its token,
// null as empty. Used for OpenAI error "code" and "param", which servers send as either.
simdjson::error_code scalar_text(simdjson::ondemand::value v, std::string_view& out);

// The fields of an OpenAI error object ({"message","type","param","code"}); views into the
// parser's buffers. Unknown fields are skipped.
struct ErrorFields {
  std::string_view message;
  std::string_view type;
  std::string_view param;
  std::string_view code;
};
// Reads one of the four error keys into `out`; returns false (and leaves the value unread) for
// any other key. `e` receives a type error.
bool read_error_field(std::string_view key, simdjson::ondemand::value v, ErrorFields& out,
                      simdjson::error_code& e);
simdjson::error_code read_error_object(simdjson::ondemand::object obj, ErrorFields& out);

// An integer that may be sent as 12, 12.0 or null (null reads as 0).
simdjson::error_code read_int(simdjson::ondemand::value& v, int64_t& out);
// An OpenAI "usage" object; null leaves `out` empty. On a type error `bad_key` names the field.
simdjson::error_code read_usage(simdjson::ondemand::value& v, std::optional<Usage>& out,
                                std::string_view& bad_key);

// Index of the first non-whitespace byte at or after `pos`, or s.size().
inline size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size() && is_json_space(s[pos])) ++pos;
  return pos;
}

// True when the first non-whitespace byte is '{' (tells "malformed" from "not an object").
inline bool opens_object(std::string_view s) {
  size_t i = skip_space(s, 0);
  return i < s.size() && s[i] == '{';
}

// Copies `body` into `padded` (capacity reused) with simdjson's padding after it.
inline void copy_padded(std::string& padded, std::string_view body) {
  if (padded.capacity() < body.size() + simdjson::SIMDJSON_PADDING) {
    padded.reserve(body.size() + simdjson::SIMDJSON_PADDING);
  }
  padded.assign(body.data(), body.size());
}

}  // namespace cutline::proto::json_scan
