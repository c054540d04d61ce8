#pragma once
// BpeTokenizer: byte-level BPE (GGUF tokenizer.ggml.model = "gpt2"; Llama 3, Qwen2, SmolLM, the
// built-in tiny model). Text is split by the pre-tokenizer, each chunk's bytes are mapped through
// GPT-2's byte-to-unicode table, and merges are applied lowest rank first with a priority queue
// over adjacent pairs (O(n log n) per chunk). Control tokens are never produced from text; every
// byte has a token, so decode(encode(s)) == s for any byte string.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/model/pre_tokenizer.h"
#include "cutline/model/tokenizer.h"
#include "cutline/model/vocabulary.h"

namespace cutline::model {

class BpeTokenizer final : public Tokenizer {
 public:
  // `merges` are "left right" pairs in rank order (tokenizer.ggml.merges). kBadRequest when a
  // byte has no token or a merge names an unknown token (the message names the token).
  static Result<std::unique_ptr<BpeTokenizer>> create(Vocabulary vocab,
                                                      std::span<const std::string_view> merges,
                                                      PreTokenizer pre);

  int32_t vocab_size() const override { return vocab_.size(); }
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  std::string_view token_bytes(int32_t id) const override;
  int32_t special_token_id(std::string_view text) const override;
  int32_t bos_id() const override { return vocab_.bos_id; }
  std::span<const int32_t> eos_ids() const override { return vocab_.eos_ids; }
  bool is_control(int32_t id) const override;
  std::span<const SpecialToken> special_tokens() const override { return specials_; }

  PreTokenizer pre_tokenizer() const { return pre_; }

 private:
  BpeTokenizer() = default;
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;

  Vocabulary vocab_;
  PreTokenizer pre_ = PreTokenizer::kGpt2;
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  std::vector<std::string> bytes_;                             // decoded bytes per id
  std::unordered_map<std::string_view, int32_t> token_ids_;    // normal token text -> id
  std::unordered_map<std::string_view, int32_t> special_ids_;  // control/user token text -> id
  std::unordered_map<uint64_t, Merge> merges_;                 // pair_key(left, right) -> merge
  std::vector<SpecialToken> specials_;     // views into vocab_.tokens, longest first
  std::array<int32_t, 256> byte_token_{};  // byte -> its single-byte token
};

}  // namespace cutline::model
