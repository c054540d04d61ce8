#include "cutline/base/json_string.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace cutline::base {
namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool read_hex4(std::string_view s, size_t pos, uint32_t& out) {
  if (pos + 4 > s.size()) return false;
  out = 0;
  for (size_t i = pos; i < pos + 4; ++i) {
    char c = s[i];
    out <<= 4;
    if (c >= '0' && c <= '9') {
      out |= static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      out |= static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      out |= static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return false;
    }
  }
  return true;
}

// True when none of the 8 bytes at `p` is a control character, '"' or '\\'. On one 64-bit word:
// for n <= 0x80, (x - n * kOnes) & ~x & kHigh is non-zero exactly when some byte is below n (a
// borrow may mark bytes above that one too, never when none is); the XORs turn '"' and '\\'
// into zero bytes.
bool plain_word(const char* p) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  uint64_t x;
  std::memcpy(&x, p, sizeof x);
  const uint64_t quote = x ^ (kOnes * '"');
  const uint64_t backslash = x ^ (kOnes * '\\');
  const uint64_t hits =
      ((x - kOnes * 0x20) & ~x) | ((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash);
  return (hits & kHigh) == 0;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto plain = [](unsigned char c) { return c >= 0x20 && c != '"' && c != '\\'; };
  size_t clean = 0;
  // Eight bytes at a time while none needs an escape; the last few bytes as the word that ends
  // the string (or, in a string shorter than a word, padded with plain bytes).
  if (s.size() >= 8) {
    while (clean + 8 <= s.size() && plain_word(s.data() + clean)) clean += 8;
    if (clean < s.size() && clean + 8 > s.size() && plain_word(s.data() + s.size() - 8)) {
      clean = s.size();
    }
  } else {
    char word[8] = {'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a'};
    if (!s.empty()) std::memcpy(word, s.data(), s.size());
    if (plain_word(word)) clean = s.size();
  }
  while (clean < s.size() && plain(static_cast<unsigned char>(s[clean]))) ++clean;
  if (clean == s.size()) {
    // Nothing to escape (keys, ids, most text): the quotes and the bytes in one copy.
    const size_t at = out.size();
    out.resize(at + s.size() + 2);
    char* p = out.data() + at;
    p[0] = '"';
    if (!s.empty()) std::memcpy(p + 1, s.data(), s.size());
    p[s.size() + 1] = '"';
    return;
  }
  out.push_back('"');
  out.append(s.data(), clean);
  size_t run_start = clean;
  for (size_t i = clean; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (plain(c)) continue;
    out.append(s.data() + run_start, i - run_start);
    run_start = i + 1;
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      default: {
        const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        out.append(esc, 6);
      }
    }
  }
  out.append(s.data() + run_start, s.size() - run_start);
  out.push_back('"');
}

bool decode_json_string(std::string_view token, std::string& out) {
  if (token.size() < 2 || token.front() != '"' || token.back() != '"') return false;
  std::string_view s = token.substr(1, token.size() - 2);
  size_t i = 0;
  while (i < s.size()) {
    size_t esc = s.find('\\', i);
    if (esc == std::string_view::npos) esc = s.size();
    out.append(s.data() + i, esc - i);
    if (esc == s.size()) break;
    if (esc + 1 >= s.size()) return false;
    char c = s[esc + 1];
    i = esc + 2;
    switch (c) {
      case '"':
        out.push_back('"');
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '/':
        out.push_back('/');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u': {
        uint32_t cp;
        if (!read_hex4(s, i, cp)) return false;
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo;
          if (i + 6 <= s.size() && s[i] == '\\' && s[i + 1] == 'u' && read_hex4(s, i + 2, lo) &&
              lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          } else {
            cp = 0xFFFD;  // a lone high surrogate
          }
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          cp = 0xFFFD;  // a lone low surrogate
        }
        append_utf8(out, cp);
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

}  // namespace cutline::base
