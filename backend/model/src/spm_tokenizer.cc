#include "cutline/model/spm_tokenizer.h"

#include <cstdio>
#include <queue>

#include "cutline/model/special_tokens.h"
#include "unicode_class.h"

namespace cutline::model {

namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";   // U+2581 "▁"
constexpr std::string_view kUnknownPiece = "\xE2\x96\x85";  // U+2585, as llama.cpp prints <unk>

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (true) {
    size_t hit = text.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(text.substr(pos));
  return out;
}

// "<0x0A>" -> 10; -1 when the text is not a byte token.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    char c = text[i];
    int d = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                     : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

Result<std::unique_ptr<SpmTokenizer>> SpmTokenizer::create(Vocabulary vocab,
                                                           bool add_space_prefix) {
  std::unique_ptr<SpmTokenizer> t(new SpmTokenizer());
  t->vocab_ = std::move(vocab);
  t->add_space_prefix_ = add_space_prefix;
  Vocabulary& v = t->vocab_;
  const int32_t n = v.size();
  if (static_cast<int32_t>(v.kinds.size()) != n) {
    return make_error(ErrorKind::kBadRequest, "spm tokenizer: token types do not match tokens");
  }
  if (v.scores.empty()) v.scores.assign(n, 0.0f);
  if (static_cast<int32_t>(v.scores.size()) != n) {
    return make_error(ErrorKind::kBadRequest, "spm tokenizer: scores do not match tokens");
  }
  t->byte_token_.fill(-1);
  t->bytes_.resize(n);
  bool has_types = false;
  for (TokenKind k : v.kinds) has_types |= k != TokenKind::kNormal;
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = v.tokens[id];
    int byte = parse_byte_token(text);
    if (byte >= 0 && (v.kinds[id] == TokenKind::kByte || !has_types)) {
      if (t->byte_token_[byte] < 0) t->byte_token_[byte] = id;
      t->bytes_[id] = std::string(1, static_cast<char>(byte));
      continue;
    }
    switch (v.kinds[id]) {
      case TokenKind::kControl:
        t->special_ids_.emplace(text, id);
        break;
      case TokenKind::kUnknown:
        t->special_ids_.emplace(text, id);
        t->bytes_[id] = std::string(kUnknownPiece);
        break;
      case TokenKind::kUserDefined:
        t->special_ids_.emplace(text, id);
        t->piece_ids_.emplace(text, id);
        t->bytes_[id] = replace_all(text, kSpaceMarker, " ");
        break;
      case TokenKind::kUnused:
        t->bytes_[id] = replace_all(text, kSpaceMarker, " ");
        break;
      default:
        t->piece_ids_.emplace(text, id);
        if (!has_types) t->special_ids_.emplace(text, id);
        t->bytes_[id] = replace_all(text, kSpaceMarker, " ");
        break;
    }
  }
  if (v.unk_id < 0) {
    for (int b = 0; b < 256; ++b) {
      if (t->byte_token_[b] < 0) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        return make_error(ErrorKind::kBadRequest,
                          std::string("spm tokenizer: the vocabulary has no byte-fallback token ") +
                              name + " and no unknown token");
      }
    }
  }
  t->specials_ = collect_special_tokens(t->vocab_);
  return t;
}

void SpmTokenizer::encode_text(std::string_view raw, std::vector<int32_t>& out) const {
  if (raw.empty()) return;
  std::string text;
  if (add_space_prefix_) text.append(kSpaceMarker);
  text.append(replace_all(raw, " ", kSpaceMarker));

  struct Symbol {
    int32_t prev, next;
    size_t offset, n;  // bytes of text; n == 0 once merged away
  };
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < text.size();) {
    size_t len;
    decode_utf8(text, pos, len);
    int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, pos + len < text.size() ? index + 1 : -1, pos, len});
    pos += len;
  }
  struct Bigram {
    float score;
    int32_t left, right;
    size_t size;
    bool operator<(const Bigram& o) const {
      return score < o.score || (score == o.score && left > o.left);
    }
  };
  std::priority_queue<Bigram> queue;
  std::string_view view(text);
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    std::string_view piece = view.substr(symbols[left].offset, symbols[left].n + symbols[right].n);
    auto it = piece_ids_.find(piece);
    if (it == piece_ids_.end()) return;
    queue.push({vocab_.scores[it->second], left, right, piece.size()});
  };
  for (size_t i = 1; i < symbols.size(); ++i) {
    try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
  }
  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size || l.next != b.right) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    std::string_view piece = view.substr(symbols[i].offset, symbols[i].n);
    if (auto it = piece_ids_.find(piece); it != piece_ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    for (char c : piece) {
      int32_t id = byte_token_[static_cast<uint8_t>(c)];
      out.push_back(id >= 0 ? id : vocab_.unk_id);
    }
  }
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && vocab_.add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);
  encode_text(text, out);
  return out;
}

std::string_view SpmTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_.size()) return {};
  return bytes_[id];
}

int32_t SpmTokenizer::special_token_id(std::string_view text) const {
  auto it = special_ids_.find(text);
  return it == special_ids_.end() ? -1 : it->second;
}

bool SpmTokenizer::is_control(int32_t id) const {
  return id >= 0 && id < vocab_.size() && vocab_.kinds[id] == TokenKind::kControl;
}

}  // namespace cutline::model
