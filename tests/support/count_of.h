#pragma once
// Counting a needle in a body: "exactly one stop record per answer" is the assertion it serves.

#include <cstddef>
#include <string_view>

namespace cutline::test {

// Occurrences of `needle` in `text` (not overlapping).
inline size_t count_of(std::string_view text, std::string_view needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string_view::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

}  // namespace cutline::test
