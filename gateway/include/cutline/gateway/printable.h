#pragma once
// Bytes a client sent (a header value, the request-target, the Host of an absolute-form target)
// as they may appear in an error message, a stop record or an access-log line: printable ASCII
// kept, every other byte written as \xNN, so invalid UTF-8 or a control character never reaches
// a JSON string or a terminal. Used by the request phases' error messages and the access log.

#include <cstddef>
#include <string>
#include <string_view>

namespace cutline::gateway {

// True when every byte of `v` is printable ASCII (printable() would return it unchanged).
inline bool is_printable(std::string_view v) {
  for (char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) return false;
  }
  return true;
}

// `v` with each byte that is not printable ASCII written as \xNN (lowercase hex); at most
// `max_bytes` of `v`, then "...".
inline std::string printable(std::string_view v, size_t max_bytes = 64) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(v.size() < max_bytes ? v.size() : max_bytes);
  for (size_t i = 0; i < v.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out.append("\\x").push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  if (v.size() > max_bytes) out.append("...");
  return out;
}

}  // namespace cutline::gateway
