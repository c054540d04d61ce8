#include "cutline/model/pre_tokenizer.h"

#include <cstdint>

#include "unicode_class.h"

namespace cutline::model {

PreTokenizer pre_tokenizer_from_name(std::string_view name) {
  // llama.cpp's names for the Llama 3 pattern (and models that reuse it).
  for (std::string_view n : {"llama-bpe", "llama3", "llama-v3", "smollm", "falcon3", "dbrx",
                             "tekken", "command-r", "exaone", "pixtral"}) {
    if (name == n) return PreTokenizer::kLlama3;
  }
  for (std::string_view n : {"qwen2", "deepseek-r1-qwen", "stablelm2", "hunyuan"}) {
    if (name == n) return PreTokenizer::kQwen2;
  }
  return PreTokenizer::kGpt2;
}

namespace {

// The text decoded once into characters with their byte offsets and classes.
class Chars {
 public:
  explicit Chars(std::string_view text) : text_(text) {
    for (size_t pos = 0; pos < text.size();) {
      size_t len;
      uint32_t cp = decode_utf8(text, pos, len);
      cps_.push_back(cp);
      cls_.push_back(char_class(cp));
      offsets_.push_back(pos);
      pos += len;
    }
    offsets_.push_back(text.size());
  }
  size_t size() const { return cps_.size(); }
  uint32_t cp(size_t i) const { return i < cps_.size() ? cps_[i] : 0; }
  // Class of character i; kOther past the end is never consulted by callers that check size().
  CharClass cls(size_t i) const { return i < cls_.size() ? cls_[i] : CharClass::kOther; }
  bool is(size_t i, CharClass c) const { return i < cls_.size() && cls_[i] == c; }
  bool is_newline(size_t i) const {
    return i < cps_.size() && (cps_[i] == '\r' || cps_[i] == '\n');
  }
  std::string_view slice(size_t from, size_t to) const {
    return text_.substr(offsets_[from], offsets_[to] - offsets_[from]);
  }

 private:
  std::string_view text_;
  std::vector<uint32_t> cps_;
  std::vector<CharClass> cls_;
  std::vector<size_t> offsets_;
};

// Simple case folding for the contraction letters: ASCII, and U+017F LATIN SMALL LETTER LONG S,
// which folds to 's' (the reference regex engines match (?i:'s) against "'ſ" too).
uint32_t fold(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  return c == 0x017F ? 's' : c;
}

// 's 't 're 've 'm 'll 'd at i; returns the match length in characters or 0.
size_t contraction(const Chars& c, size_t i, bool case_insensitive) {
  if (c.cp(i) != '\'' || i + 1 >= c.size()) return 0;
  auto at = [&](size_t k) { return case_insensitive ? fold(c.cp(k)) : c.cp(k); };
  uint32_t a = at(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 < c.size()) {
    uint32_t b = at(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

size_t run_of(const Chars& c, size_t i, CharClass cls) {
  size_t j = i;
  while (j < c.size() && c.is(j, cls)) ++j;
  return j;
}

bool is_other(const Chars& c, size_t i) { return i < c.size() && c.is(i, CharClass::kOther); }

// \s+(?!\S) then \s+ at i (i is white space): the end of the match.
size_t trailing_space(const Chars& c, size_t i) {
  size_t end = run_of(c, i, CharClass::kSpace);
  if (end < c.size() && end - i > 1) return end - 1;  // leave one space for the next chunk
  return end;
}

void split_gpt2(const Chars& c, std::vector<std::string_view>& out) {
  size_t i = 0;
  while (i < c.size()) {
    size_t end;
    if (size_t n = contraction(c, i, false)) {
      end = i + n;
    } else {
      size_t j = (c.cp(i) == ' ') ? i + 1 : i;  // " ?" prefix of the next three rules
      if (c.is(j, CharClass::kLetter)) {
        end = run_of(c, j, CharClass::kLetter);
      } else if (c.is(j, CharClass::kNumber)) {
        end = run_of(c, j, CharClass::kNumber);
      } else if (is_other(c, j)) {
        end = j;
        while (is_other(c, end)) ++end;
      } else {
        end = trailing_space(c, i);
      }
    }
    out.push_back(c.slice(i, end));
    i = end;
  }
}

void split_llama3(const Chars& c, bool digits_of_three, std::vector<std::string_view>& out) {
  size_t i = 0;
  while (i < c.size()) {
    size_t end = 0;
    if (size_t n = contraction(c, i, true)) {
      end = i + n;
    } else if (c.is(i, CharClass::kLetter)) {
      end = run_of(c, i, CharClass::kLetter);
    } else if (!c.is_newline(i) && !c.is(i, CharClass::kNumber) &&
               c.is(i + 1, CharClass::kLetter)) {
      // [^\r\n\p{L}\p{N}]?\p{L}+ with its one-character prefix.
      end = run_of(c, i + 1, CharClass::kLetter);
    } else if (c.is(i, CharClass::kNumber)) {
      size_t max = digits_of_three ? 3 : 1;
      end = i;
      while (end < c.size() && end - i < max && c.is(end, CharClass::kNumber)) ++end;
    } else if (is_other(c, i) || (c.cp(i) == ' ' && is_other(c, i + 1))) {
      // " ?[^\s\p{L}\p{N}]+[\r\n]*"
      end = c.cp(i) == ' ' ? i + 1 : i;
      while (is_other(c, end)) ++end;
      while (c.is_newline(end)) ++end;
    } else {
      // White space: \s*[\r\n]+ (ends after the run's last newline), else \s+(?!\S), else \s+.
      size_t run_end = run_of(c, i, CharClass::kSpace);
      size_t last_newline = SIZE_MAX;
      for (size_t k = i; k < run_end; ++k) {
        if (c.is_newline(k)) last_newline = k;
      }
      if (last_newline != SIZE_MAX) {
        end = last_newline + 1;
      } else {
        end = trailing_space(c, i);
      }
    }
    out.push_back(c.slice(i, end));
    i = end;
  }
}

}  // namespace

void pre_tokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& out) {
  if (text.empty()) return;
  Chars chars(text);
  switch (kind) {
    case PreTokenizer::kGpt2:
      split_gpt2(chars, out);
      return;
    case PreTokenizer::kLlama3:
      split_llama3(chars, true, out);
      return;
    case PreTokenizer::kQwen2:
      split_llama3(chars, false, out);
      return;
  }
}

}  // namespace cutline::model
