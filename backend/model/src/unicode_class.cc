#include "unicode_class.h"

#include <algorithm>
#include <iterator>

namespace cutline::model {

uint32_t decode_utf8(std::string_view text, size_t pos, size_t& len) {
  auto b = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  uint8_t c = b(pos);
  len = 1;
  if (c < 0x80) return c;
  size_t n;
  uint32_t cp;
  uint32_t min;
  if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return kInvalidCodePoint;
  }
  if (pos + n > text.size()) return kInvalidCodePoint;
  for (size_t i = 1; i < n; ++i) {
    uint8_t t = b(pos + i);
    if ((t & 0xC0) != 0x80) return kInvalidCodePoint;
    cp = (cp << 6) | (t & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kInvalidCodePoint;
  len = n;
  return cp;
}

namespace {

#include "unicode_tables.inc"

constexpr const char* kCategoryNames[] = {
    "Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
    "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co",
};
static_assert(std::size(kCategoryNames) == static_cast<size_t>(GeneralCategory::kCo) + 1);

bool in(GeneralCategory c, GeneralCategory lo, GeneralCategory hi) { return c >= lo && c <= hi; }

}  // namespace

GeneralCategory general_category(uint32_t cp) {
  if (cp > 0x10FFFF) return GeneralCategory::kCn;
  // The last run whose first code point is <= cp (the first run starts at 0).
  auto it = std::upper_bound(std::begin(kCategoryRuns), std::end(kCategoryRuns), cp,
                             [](uint32_t v, uint32_t run) { return v < (run >> 5); });
  return static_cast<GeneralCategory>(*(it - 1) & 0x1F);
}

const char* general_category_name(GeneralCategory c) {
  return kCategoryNames[static_cast<size_t>(c)];
}

const char* unicode_version() { return kUnicodeVersion; }

bool is_letter(uint32_t cp) {
  return in(general_category(cp), GeneralCategory::kLu, GeneralCategory::kLo);
}
bool is_mark(uint32_t cp) {
  return in(general_category(cp), GeneralCategory::kMn, GeneralCategory::kMe);
}
bool is_number(uint32_t cp) {
  return in(general_category(cp), GeneralCategory::kNd, GeneralCategory::kNo);
}
bool is_punctuation(uint32_t cp) {
  return in(general_category(cp), GeneralCategory::kPc, GeneralCategory::kPo);
}
bool is_symbol(uint32_t cp) {
  return in(general_category(cp), GeneralCategory::kSm, GeneralCategory::kSo);
}
bool is_separator(uint32_t cp) {
  return in(general_category(cp), GeneralCategory::kZs, GeneralCategory::kZp);
}

bool is_white_space(uint32_t cp) {
  for (const auto& r : kWhiteSpaceRanges) {
    if (cp < r[0]) return false;
    if (cp <= r[1]) return true;
  }
  return false;
}

CharClass char_class(uint32_t cp) {
  if (cp < 0x80) {
    if (cp >= 'a' && cp <= 'z') return CharClass::kLetter;
    if (cp >= 'A' && cp <= 'Z') return CharClass::kLetter;
    if (cp >= '0' && cp <= '9') return CharClass::kNumber;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CharClass::kSpace;
    return CharClass::kOther;
  }
  if (is_white_space(cp)) return CharClass::kSpace;
  GeneralCategory c = general_category(cp);
  if (in(c, GeneralCategory::kLu, GeneralCategory::kLo)) return CharClass::kLetter;
  if (in(c, GeneralCategory::kNd, GeneralCategory::kNo)) return CharClass::kNumber;
  return CharClass::kOther;
}

}  // namespace cutline::model
