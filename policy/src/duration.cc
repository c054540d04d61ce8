// Duration strings: "250ms", "10s", "1.5s", "2m" (duration.h).
#include "cutline/policy/duration.h"

#include <cstdint>
#include <limits>

namespace cutline::policy {

std::optional<int64_t> parse_duration_ms(std::string_view text) {
  // Split the number from the unit.
  size_t i = 0;
  int64_t whole = 0;
  bool any_digit = false;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    whole = whole * 10 + (text[i] - '0');
    if (whole > std::numeric_limits<int32_t>::max()) return std::nullopt;
    any_digit = true;
    ++i;
  }
  // Fraction kept as numerator/denominator (at most 6 digits are significant).
  int64_t frac_num = 0, frac_den = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    bool frac_digit = false;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (frac_den < 1000000) {
        frac_num = frac_num * 10 + (text[i] - '0');
        frac_den *= 10;
      }
      frac_digit = true;
      ++i;
    }
    if (!frac_digit) return std::nullopt;
  }
  if (!any_digit) return std::nullopt;
  std::string_view unit = text.substr(i);
  int64_t scale;
  if (unit == "ms") {
    scale = 1;
  } else if (unit == "s") {
    scale = 1000;
  } else if (unit == "m") {
    scale = 60000;
  } else {
    return std::nullopt;
  }
  int64_t ms = whole * scale;
  // Round a fractional part up to whole milliseconds.
  int64_t frac_ms = (frac_num * scale + frac_den - 1) / frac_den;
  ms += frac_ms;
  if (ms > std::numeric_limits<int32_t>::max()) return std::nullopt;
  return ms;
}

std::string format_duration_ms(int64_t ms) {
  if (ms != 0 && ms % 60000 == 0) return std::to_string(ms / 60000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace cutline::policy
