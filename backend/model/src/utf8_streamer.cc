// Utf8Streamer (declared in tokenizer.h): releases only whole UTF-8 characters.
#include <cstdint>

#include "cutline/model/tokenizer.h"

namespace cutline::model {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

enum class Step { kComplete, kIncomplete, kInvalid };

// Examines the character starting at p[0] (n > 0 bytes available). kComplete: `len` bytes form a
// valid character. kIncomplete: the n bytes are a valid prefix of a longer character.
// kInvalid: the first `len` bytes are a maximal invalid subpart (one U+FFFD replaces them).
Step examine(const uint8_t* p, size_t n, size_t& len) {
  uint8_t c = p[0];
  if (c < 0x80) {
    len = 1;
    return Step::kComplete;
  }
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    len = 1;
    return Step::kInvalid;
  }
  for (size_t i = 1; i < need; ++i) {
    if (i >= n) {
      len = i;
      return Step::kIncomplete;
    }
    uint8_t b = p[i];
    bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      len = i;
      return Step::kInvalid;
    }
  }
  len = need;
  return Step::kComplete;
}

}  // namespace

std::string Utf8Streamer::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  const auto* p = reinterpret_cast<const uint8_t*>(pending_.data());
  size_t n = pending_.size();
  size_t pos = 0;
  while (pos < n) {
    size_t len = 0;
    Step s = examine(p + pos, n - pos, len);
    if (s == Step::kIncomplete) break;
    if (s == Step::kComplete) {
      out.append(pending_, pos, len);
    } else {
      out.append(kReplacement);
    }
    pos += len;
  }
  pending_.erase(0, pos);
  return out;
}

std::string Utf8Streamer::flush() {
  std::string out;
  if (!pending_.empty()) out.append(kReplacement);  // only an incomplete character can remain
  pending_.clear();
  return out;
}

}  // namespace cutline::model
