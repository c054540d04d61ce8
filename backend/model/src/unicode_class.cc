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

struct Range {
  uint32_t lo, hi;
  CharClass cls;
};

// Sorted, non-overlapping. Letters include Lm/Lo; marks (Mn/Mc) are "other", as in \p{L}.
constexpr Range kRanges[] = {
    {0x0009, 0x000D, CharClass::kSpace},    {0x0020, 0x0020, CharClass::kSpace},
    {0x0030, 0x0039, CharClass::kNumber},   {0x0041, 0x005A, CharClass::kLetter},
    {0x0061, 0x007A, CharClass::kLetter},   {0x0085, 0x0085, CharClass::kSpace},
    {0x00A0, 0x00A0, CharClass::kSpace},    {0x00AA, 0x00AA, CharClass::kLetter},
    {0x00B2, 0x00B3, CharClass::kNumber},   {0x00B5, 0x00B5, CharClass::kLetter},
    {0x00B9, 0x00B9, CharClass::kNumber},   {0x00BA, 0x00BA, CharClass::kLetter},
    {0x00BC, 0x00BE, CharClass::kNumber},   {0x00C0, 0x00D6, CharClass::kLetter},
    {0x00D8, 0x00F6, CharClass::kLetter},   {0x00F8, 0x02C1, CharClass::kLetter},
    {0x02C6, 0x02D1, CharClass::kLetter},   {0x02E0, 0x02E4, CharClass::kLetter},
    {0x0370, 0x0374, CharClass::kLetter},   {0x0376, 0x037D, CharClass::kLetter},
    {0x037F, 0x037F, CharClass::kLetter},   {0x0386, 0x0386, CharClass::kLetter},
    {0x0388, 0x03F5, CharClass::kLetter},   {0x03F7, 0x0481, CharClass::kLetter},
    {0x048A, 0x052F, CharClass::kLetter},   {0x0531, 0x0556, CharClass::kLetter},
    {0x0560, 0x0588, CharClass::kLetter},   {0x05D0, 0x05EA, CharClass::kLetter},
    {0x05EF, 0x05F2, CharClass::kLetter},   {0x0620, 0x064A, CharClass::kLetter},
    {0x0660, 0x0669, CharClass::kNumber},   {0x066E, 0x066F, CharClass::kLetter},
    {0x0671, 0x06D3, CharClass::kLetter},   {0x06D5, 0x06D5, CharClass::kLetter},
    {0x06F0, 0x06F9, CharClass::kNumber},   {0x06FA, 0x06FC, CharClass::kLetter},
    {0x0904, 0x0939, CharClass::kLetter},   {0x093D, 0x093D, CharClass::kLetter},
    {0x0950, 0x0950, CharClass::kLetter},   {0x0958, 0x0961, CharClass::kLetter},
    {0x0966, 0x096F, CharClass::kNumber},   {0x0971, 0x0980, CharClass::kLetter},
    {0x0985, 0x09B9, CharClass::kLetter},   {0x09E6, 0x09EF, CharClass::kNumber},
    {0x0A05, 0x0A39, CharClass::kLetter},   {0x0A66, 0x0A6F, CharClass::kNumber},
    {0x0A85, 0x0AB9, CharClass::kLetter},   {0x0AE6, 0x0AEF, CharClass::kNumber},
    {0x0B05, 0x0B39, CharClass::kLetter},   {0x0B66, 0x0B6F, CharClass::kNumber},
    {0x0B85, 0x0BB9, CharClass::kLetter},   {0x0BE6, 0x0BF2, CharClass::kNumber},
    {0x0C05, 0x0C39, CharClass::kLetter},   {0x0C66, 0x0C6F, CharClass::kNumber},
    {0x0C85, 0x0CB9, CharClass::kLetter},   {0x0CE6, 0x0CEF, CharClass::kNumber},
    {0x0D05, 0x0D3A, CharClass::kLetter},   {0x0D66, 0x0D78, CharClass::kNumber},
    {0x0E01, 0x0E30, CharClass::kLetter},   {0x0E32, 0x0E33, CharClass::kLetter},
    {0x0E40, 0x0E46, CharClass::kLetter},   {0x0E50, 0x0E59, CharClass::kNumber},
    {0x0E81, 0x0EB0, CharClass::kLetter},   {0x0ED0, 0x0ED9, CharClass::kNumber},
    {0x0F00, 0x0F00, CharClass::kLetter},   {0x0F20, 0x0F33, CharClass::kNumber},
    {0x0F40, 0x0F6C, CharClass::kLetter},   {0x1000, 0x102A, CharClass::kLetter},
    {0x1040, 0x1049, CharClass::kNumber},   {0x10A0, 0x10FF, CharClass::kLetter},
    {0x1100, 0x135A, CharClass::kLetter},   {0x1369, 0x137C, CharClass::kNumber},
    {0x13A0, 0x13FD, CharClass::kLetter},   {0x1401, 0x166C, CharClass::kLetter},
    {0x1680, 0x1680, CharClass::kSpace},    {0x1681, 0x169A, CharClass::kLetter},
    {0x16A0, 0x16EA, CharClass::kLetter},   {0x16EE, 0x16F0, CharClass::kNumber},
    {0x1780, 0x17B3, CharClass::kLetter},   {0x17E0, 0x17E9, CharClass::kNumber},
    {0x1820, 0x1878, CharClass::kLetter},   {0x1D00, 0x1DBF, CharClass::kLetter},
    {0x1E00, 0x1FBC, CharClass::kLetter},   {0x1FC2, 0x1FCC, CharClass::kLetter},
    {0x1FD0, 0x1FDB, CharClass::kLetter},   {0x1FE0, 0x1FEC, CharClass::kLetter},
    {0x1FF2, 0x1FFC, CharClass::kLetter},   {0x2000, 0x200A, CharClass::kSpace},
    {0x2028, 0x2029, CharClass::kSpace},    {0x202F, 0x202F, CharClass::kSpace},
    {0x205F, 0x205F, CharClass::kSpace},    {0x2070, 0x2070, CharClass::kNumber},
    {0x2071, 0x2071, CharClass::kLetter},   {0x2074, 0x2079, CharClass::kNumber},
    {0x207F, 0x207F, CharClass::kLetter},   {0x2080, 0x2089, CharClass::kNumber},
    {0x2090, 0x209C, CharClass::kLetter},   {0x2102, 0x2102, CharClass::kLetter},
    {0x2107, 0x2107, CharClass::kLetter},   {0x210A, 0x2113, CharClass::kLetter},
    {0x2115, 0x2115, CharClass::kLetter},   {0x2119, 0x211D, CharClass::kLetter},
    {0x2124, 0x2124, CharClass::kLetter},   {0x2126, 0x2126, CharClass::kLetter},
    {0x2128, 0x2128, CharClass::kLetter},   {0x212A, 0x212D, CharClass::kLetter},
    {0x212F, 0x2139, CharClass::kLetter},   {0x2150, 0x2189, CharClass::kNumber},
    {0x2460, 0x249B, CharClass::kNumber},   {0x24EA, 0x24FF, CharClass::kNumber},
    {0x2776, 0x2793, CharClass::kNumber},   {0x2C00, 0x2CE4, CharClass::kLetter},
    {0x2D00, 0x2D6F, CharClass::kLetter},   {0x3000, 0x3000, CharClass::kSpace},
    {0x3005, 0x3006, CharClass::kLetter},   {0x3007, 0x3007, CharClass::kNumber},
    {0x3021, 0x3029, CharClass::kNumber},   {0x3031, 0x3035, CharClass::kLetter},
    {0x3038, 0x303A, CharClass::kNumber},   {0x303B, 0x303C, CharClass::kLetter},
    {0x3041, 0x3096, CharClass::kLetter},   {0x309D, 0x309F, CharClass::kLetter},
    {0x30A1, 0x30FA, CharClass::kLetter},   {0x30FC, 0x30FF, CharClass::kLetter},
    {0x3105, 0x318E, CharClass::kLetter},   {0x3192, 0x3195, CharClass::kNumber},
    {0x31A0, 0x31BF, CharClass::kLetter},   {0x31F0, 0x31FF, CharClass::kLetter},
    {0x3220, 0x3229, CharClass::kNumber},   {0x3248, 0x324F, CharClass::kNumber},
    {0x3251, 0x325F, CharClass::kNumber},   {0x3280, 0x3289, CharClass::kNumber},
    {0x32B1, 0x32BF, CharClass::kNumber},   {0x3400, 0x4DBF, CharClass::kLetter},
    {0x4E00, 0x9FFF, CharClass::kLetter},   {0xA000, 0xA48C, CharClass::kLetter},
    {0xA4D0, 0xA4FD, CharClass::kLetter},   {0xA500, 0xA60C, CharClass::kLetter},
    {0xA620, 0xA629, CharClass::kNumber},   {0xA640, 0xA66E, CharClass::kLetter},
    {0xA680, 0xA69D, CharClass::kLetter},   {0xA722, 0xA788, CharClass::kLetter},
    {0xA78B, 0xA7FF, CharClass::kLetter},   {0xAC00, 0xD7A3, CharClass::kLetter},
    {0xF900, 0xFAD9, CharClass::kLetter},   {0xFB00, 0xFB06, CharClass::kLetter},
    {0xFB1D, 0xFB1D, CharClass::kLetter},   {0xFB1F, 0xFB28, CharClass::kLetter},
    {0xFB2A, 0xFDFB, CharClass::kLetter},   {0xFE70, 0xFEFC, CharClass::kLetter},
    {0xFF10, 0xFF19, CharClass::kNumber},   {0xFF21, 0xFF3A, CharClass::kLetter},
    {0xFF41, 0xFF5A, CharClass::kLetter},   {0xFF66, 0xFFDC, CharClass::kLetter},
    {0x10000, 0x100FA, CharClass::kLetter}, {0x10107, 0x10133, CharClass::kNumber},
    {0x10140, 0x10178, CharClass::kNumber}, {0x10280, 0x1031F, CharClass::kLetter},
    {0x10320, 0x10323, CharClass::kNumber}, {0x10330, 0x1034A, CharClass::kLetter},
    {0x10400, 0x1049D, CharClass::kLetter}, {0x104A0, 0x104A9, CharClass::kNumber},
    {0x1D400, 0x1D7CB, CharClass::kLetter}, {0x1D7CE, 0x1D7FF, CharClass::kNumber},
    {0x1F100, 0x1F10C, CharClass::kNumber}, {0x20000, 0x2FA1D, CharClass::kLetter},
    {0x30000, 0x3134A, CharClass::kLetter},
};

}  // namespace

CharClass char_class(uint32_t cp) {
  if (cp < 0x80) {
    if (cp >= 'a' && cp <= 'z') return CharClass::kLetter;
    if (cp >= 'A' && cp <= 'Z') return CharClass::kLetter;
    if (cp >= '0' && cp <= '9') return CharClass::kNumber;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CharClass::kSpace;
    return CharClass::kOther;
  }
  if (cp == kInvalidCodePoint) return CharClass::kOther;
  auto it = std::upper_bound(std::begin(kRanges), std::end(kRanges), cp,
                             [](uint32_t v, const Range& r) { return v < r.lo; });
  if (it == std::begin(kRanges)) return CharClass::kOther;
  --it;
  return cp <= it->hi ? it->cls : CharClass::kOther;
}

}  // namespace cutline::model
