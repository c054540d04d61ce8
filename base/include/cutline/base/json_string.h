#pragma once
// JSON string literals, both ways, without a JSON library: append_json_string writes one (what
// JsonWriter writes every string with), decode_json_string reads one back from a raw token (what
// the request parser's byte-range accessors hand out).

#include <string>
#include <string_view>

namespace cutline::base {

// Appends `s` to `out` as a JSON string literal, quotes included. Bytes >= 0x80 are copied
// unchanged (the caller is responsible for valid UTF-8); control characters are escaped.
void append_json_string(std::string& out, std::string_view s);

// Decodes one raw JSON string token (quotes included) into `out` (appended). Returns false on a
// malformed token. Lone surrogates decode to U+FFFD.
bool decode_json_string(std::string_view token, std::string& out);

}  // namespace cutline::base
