#include "cutline/model/bpe_trainer.h"

#include <algorithm>
#include <array>
#include <map>
#include <unordered_map>
#include <utility>

namespace cutline::model {

namespace {

// GPT-2's bytes_to_unicode(): printable bytes map to themselves, the rest to U+0100 onwards.
struct ByteMap {
  std::array<std::string, 256> to_text;
  std::unordered_map<uint32_t, uint8_t> from_cp;

  ByteMap() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
      std::string& s = to_text[b];
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      from_cp.emplace(cp, static_cast<uint8_t>(b));
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap kMap;
  return kMap;
}

}  // namespace

std::string_view byte_to_unicode(uint8_t byte) { return byte_map().to_text[byte]; }

bool unicode_to_bytes(std::string_view text, std::string& out) {
  const ByteMap& m = byte_map();
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<uint8_t>(text[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < text.size()) {
      cp = ((c & 0x1F) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3F);
      i += 2;
    } else {
      return false;  // mapped bytes are all below U+0800
    }
    auto it = m.from_cp.find(cp);
    if (it == m.from_cp.end()) return false;
    out.push_back(static_cast<char>(it->second));
  }
  return true;
}

BpeVocabulary train_bpe(std::string_view text, int32_t n_merges, PreTokenizer pre) {
  BpeVocabulary vocab;
  std::unordered_map<std::string, int32_t> ids;
  for (int b = 0; b < 256; ++b) {
    vocab.tokens.emplace_back(byte_to_unicode(static_cast<uint8_t>(b)));
    ids.emplace(vocab.tokens.back(), b);
  }

  // Unique chunks with their counts, in first-seen order (deterministic).
  std::vector<std::string_view> chunks;
  pre_tokenize(pre, text, chunks);
  std::unordered_map<std::string_view, size_t> word_index;
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  for (std::string_view chunk : chunks) {
    auto [it, inserted] = word_index.emplace(chunk, words.size());
    if (inserted) {
      std::vector<int32_t> symbols;
      for (char ch : chunk) symbols.push_back(static_cast<uint8_t>(ch));
      words.push_back(std::move(symbols));
      counts.push_back(0);
    }
    ++counts[it->second];
  }

  // Every merge shrinks the words, so the loop ends even when merges add no new token.
  while (vocab.tokens.size() < static_cast<size_t>(256 + std::max(n_merges, 0))) {
    std::map<std::pair<int32_t, int32_t>, int64_t> pairs;
    for (size_t w = 0; w < words.size(); ++w) {
      const auto& s = words[w];
      for (size_t k = 1; k < s.size(); ++k) pairs[{s[k - 1], s[k]}] += counts[w];
    }
    // Most frequent pair; std::map order breaks ties by the smaller ids.
    std::pair<int32_t, int32_t> best{-1, -1};
    int64_t best_count = 1;
    for (const auto& [pair, count] : pairs) {
      if (count > best_count) {
        best = pair;
        best_count = count;
      }
    }
    if (best.first < 0) break;  // no pair occurs twice: the text is exhausted
    const std::string& left = vocab.tokens[best.first];
    const std::string& right = vocab.tokens[best.second];
    vocab.merges.push_back(left + " " + right);
    std::string merged = left + right;
    int32_t merged_id;
    if (auto it = ids.find(merged); it != ids.end()) {
      merged_id = it->second;
    } else {
      merged_id = static_cast<int32_t>(vocab.tokens.size());
      ids.emplace(merged, merged_id);
      vocab.tokens.push_back(std::move(merged));
    }
    for (auto& s : words) {
      size_t out = 0;
      for (size_t k = 0; k < s.size(); ++k) {
        if (k + 1 < s.size() && s[k] == best.first && s[k + 1] == best.second) {
          s[out++] = merged_id;
          ++k;
        } else {
          s[out++] = s[k];
        }
      }
      s.resize(out);
    }
  }
  return vocab;
}

}  // namespace cutline::model
