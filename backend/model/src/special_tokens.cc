#include "cutline/model/special_tokens.h"

#include <algorithm>
#include <cctype>
#include <list>

namespace cutline::model {

std::string_view strip_leading_space(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return s;
}

bool strips_right(const Tokenizer& tokenizer, int32_t id) {
  for (const SpecialToken& s : tokenizer.special_tokens()) {
    if (s.id == id) return s.rstrip;
  }
  return false;
}

std::vector<SpecialToken> collect_special_tokens(const Vocabulary& vocab) {
  std::vector<SpecialToken> out;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    TokenKind k = vocab.kinds[id];
    if (k != TokenKind::kControl && k != TokenKind::kUserDefined && k != TokenKind::kUnknown)
      continue;
    if (vocab.tokens[id].empty()) continue;
    const std::string& text = vocab.tokens[id];
    const bool rstrip =
        vocab.special_rstrip && text != "<unk>" && text != "<s>" && text != "<|endoftext|>";
    out.push_back({text, id, k != TokenKind::kUserDefined, rstrip});
  }
  std::stable_sort(out.begin(), out.end(), [](const SpecialToken& a, const SpecialToken& b) {
    return a.text.size() > b.text.size();
  });
  return out;
}

std::vector<PromptFragment> split_special_tokens(const Tokenizer& tokenizer, std::string_view text,
                                                 bool control) {
  std::vector<PromptFragment> out;
  if (text.empty()) return out;
  // A list, because each special token splits the plain fragments left by the longer ones.
  std::list<PromptFragment> parts{{-1, text}};
  for (const SpecialToken& special : tokenizer.special_tokens()) {
    if (special.text.empty() || (special.control && !control)) continue;
    for (auto it = parts.begin(); it != parts.end(); ++it) {
      if (it->token >= 0) continue;
      std::string_view rest = it->text;
      size_t hit = rest.find(special.text);
      if (hit == std::string_view::npos) continue;
      // Replace this fragment by [left] token [left] token ... [right].
      auto at = parts.erase(it);
      while (hit != std::string_view::npos) {
        if (hit > 0) parts.insert(at, {-1, rest.substr(0, hit)});
        parts.insert(at, {special.id, rest.substr(hit, special.text.size())});
        rest = rest.substr(hit + special.text.size());
        if (special.rstrip) rest = strip_leading_space(rest);
        hit = rest.find(special.text);
      }
      if (!rest.empty()) parts.insert(at, {-1, rest});
      it = std::prev(at);
    }
  }
  out.assign(parts.begin(), parts.end());
  return out;
}

std::vector<int32_t> encode_with_special_tokens(const Tokenizer& tokenizer, std::string_view text,
                                                bool add_bos, bool control) {
  std::vector<int32_t> out;
  if (add_bos) out = tokenizer.encode({}, true);  // BOS alone, when the model adds one
  for (const PromptFragment& f : split_special_tokens(tokenizer, text, control)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      continue;
    }
    std::vector<int32_t> ids = tokenizer.encode(f.text, false);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return out;
}

std::string_view token_display_text(const Tokenizer& tokenizer, int32_t id) {
  if (tokenizer.is_control(id)) {
    for (const SpecialToken& s : tokenizer.special_tokens()) {
      if (s.id == id) return s.text;
    }
  }
  return tokenizer.token_bytes(id);
}

}  // namespace cutline::model
