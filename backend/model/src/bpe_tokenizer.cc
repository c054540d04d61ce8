#include "cutline/model/bpe_tokenizer.h"

#include <queue>

#include "cutline/model/bpe_trainer.h"
#include "cutline/model/special_tokens.h"

namespace cutline::model {

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::create(Vocabulary vocab,
                                                           std::span<const std::string_view> merges,
                                                           PreTokenizer pre) {
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  t->vocab_ = std::move(vocab);
  t->pre_ = pre;
  const Vocabulary& v = t->vocab_;
  const int32_t n = v.size();
  if (static_cast<int32_t>(v.kinds.size()) != n) {
    return make_error(ErrorKind::kBadRequest, "bpe tokenizer: token types do not match tokens");
  }
  // Any token that is an exact text (including control tokens) for special_token_id; the
  // mergeable vocabulary holds only normal tokens, so text never turns into a control token.
  bool has_types = false;
  for (TokenKind k : v.kinds) has_types |= k != TokenKind::kNormal;
  t->bytes_.resize(n);
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = v.tokens[id];
    switch (v.kinds[id]) {
      case TokenKind::kControl:
        t->special_ids_.emplace(text, id);
        break;  // decodes to nothing
      case TokenKind::kUserDefined:
      case TokenKind::kUnknown:
        t->special_ids_.emplace(text, id);
        t->bytes_[id] = text;
        break;
      default:
        if (!unicode_to_bytes(text, t->bytes_[id])) t->bytes_[id] = text;
        t->token_ids_.emplace(text, id);
        if (!has_types) t->special_ids_.emplace(text, id);
        break;
    }
  }
  for (int b = 0; b < 256; ++b) {
    auto it = t->token_ids_.find(byte_to_unicode(static_cast<uint8_t>(b)));
    if (it == t->token_ids_.end()) {
      return make_error(ErrorKind::kBadRequest,
                        "bpe tokenizer: the vocabulary has no token for byte " + std::to_string(b) +
                            " ('" + std::string(byte_to_unicode(static_cast<uint8_t>(b))) + "')");
    }
    t->byte_token_[b] = it->second;
  }
  t->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    std::string_view m = merges[rank];
    size_t space = m.find(' ', 1);  // a token may itself start with a space character
    if (space == std::string_view::npos) {
      return make_error(ErrorKind::kBadRequest, "bpe tokenizer: merge " + std::to_string(rank) +
                                                    " '" + std::string(m) +
                                                    "' is not two tokens separated by a space");
    }
    std::string_view left = m.substr(0, space), right = m.substr(space + 1);
    std::string joined = std::string(left) + std::string(right);
    auto l = t->token_ids_.find(left), r = t->token_ids_.find(right),
         j = t->token_ids_.find(joined);
    if (l == t->token_ids_.end() || r == t->token_ids_.end() || j == t->token_ids_.end()) {
      return make_error(ErrorKind::kBadRequest, "bpe tokenizer: merge " + std::to_string(rank) +
                                                    " '" + std::string(m) +
                                                    "' names a token missing from the vocabulary");
    }
    // The first (lowest-rank) occurrence of a pair wins, as in the reference implementation.
    t->merges_.emplace(pair_key(l->second, r->second),
                       Merge{static_cast<int32_t>(rank), j->second});
  }
  t->specials_ = collect_special_tokens(t->vocab_);
  return t;
}

void BpeTokenizer::encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const {
  if (pre_ == PreTokenizer::kLlama3) {
    // Llama 3 (ignore_merges): a chunk that is itself a token is used whole.
    std::string mapped;
    for (char c : chunk) mapped.append(byte_to_unicode(static_cast<uint8_t>(c)));
    if (auto it = token_ids_.find(mapped); it != token_ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const size_t n = chunk.size();
  if (n == 1) {
    out.push_back(byte_token_[static_cast<uint8_t>(chunk[0])]);
    return;
  }
  std::vector<int32_t> ids(n);
  std::vector<int32_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = byte_token_[static_cast<uint8_t>(chunk[i])];
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Candidate {
    int32_t rank;
    int32_t left;  // symbol position
    int32_t left_id;
    int32_t right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int32_t left) {
    if (left < 0 || next[left] < 0) return;
    auto it = merges_.find(pair_key(ids[left], ids[next[left]]));
    if (it != merges_.end()) queue.push({it->second.rank, left, ids[left], ids[next[left]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    int32_t right = next[c.left];
    // Stale entries: a neighbour merged since this candidate was queued.
    if (ids[c.left] != c.left_id || right < 0 || ids[right] != c.right_id) continue;
    ids[c.left] = merges_.find(pair_key(c.left_id, c.right_id))->second.result;
    ids[right] = -1;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    consider(prev[c.left]);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(ids[i]);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && vocab_.add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);
  std::vector<std::string_view> chunks;
  pre_tokenize(pre_, text, chunks);
  for (std::string_view chunk : chunks) encode_chunk(chunk, out);
  return out;
}

std::string_view BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_.size()) return {};
  return bytes_[id];
}

int32_t BpeTokenizer::special_token_id(std::string_view text) const {
  auto it = special_ids_.find(text);
  return it == special_ids_.end() ? -1 : it->second;
}

bool BpeTokenizer::is_control(int32_t id) const {
  return id >= 0 && id < vocab_.size() && vocab_.kinds[id] == TokenKind::kControl;
}

}  // namespace cutline::model
