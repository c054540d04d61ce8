// Size strings: "256MiB", "2GiB", "1.5G", "4096" (size.h).
#include "cutline/policy/size.h"

#include <cctype>
#include <string>

namespace cutline::policy {

namespace {

// log2 of the unit's scale, or -1 for an unknown unit (case-insensitive).
int unit_shift(std::string_view unit) {
  std::string u;
  for (char c : unit) u.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (u.empty() || u == "b") return 0;
  static constexpr struct {
    char letter;
    int shift;
  } kUnits[] = {{'k', 10}, {'m', 20}, {'g', 30}, {'t', 40}};
  for (const auto& k : kUnits) {
    if (u[0] != k.letter) continue;
    std::string_view rest = std::string_view(u).substr(1);
    if (rest.empty() || rest == "b" || rest == "ib") return k.shift;
  }
  return -1;
}

}  // namespace

std::optional<int64_t> parse_size_bytes(std::string_view text) {
  size_t i = 0;
  uint64_t whole = 0;
  bool any_digit = false;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    whole = whole * 10 + static_cast<uint64_t>(text[i] - '0');
    if (whole > (uint64_t{1} << 62)) return std::nullopt;
    any_digit = true;
    ++i;
  }
  // Fraction as numerator/denominator (at most 9 digits are significant).
  uint64_t frac_num = 0, frac_den = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    bool frac_digit = false;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (frac_den < 1000000000) {
        frac_num = frac_num * 10 + static_cast<uint64_t>(text[i] - '0');
        frac_den *= 10;
      }
      frac_digit = true;
      ++i;
    }
    if (!frac_digit) return std::nullopt;
  }
  if (!any_digit) return std::nullopt;
  const int shift = unit_shift(text.substr(i));
  if (shift < 0) return std::nullopt;
  if (shift > 0 && whole > (uint64_t{1} << (62 - shift))) return std::nullopt;
  const uint64_t bytes = (whole << shift) + ((frac_num << shift) / frac_den);
  if (bytes > (uint64_t{1} << 62)) return std::nullopt;
  return static_cast<int64_t>(bytes);
}

}  // namespace cutline::policy
