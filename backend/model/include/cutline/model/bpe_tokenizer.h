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

#include "cutline/model/pre_tokenizer.h"
#include "cutline/model/tokenizer.h"
#include "cutline/model/vocabulary.h"
#include "cutline/proto/result.h"

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

  PreTokenizer pre_tokenizer() const { return pre_; }

 private:
  BpeTokenizer() = default;
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;

  Vocabulary vocab_;
  PreTokenizer pre_ = PreTokenizer::kGpt2;
  std::vector<std::string> bytes_;                      // decoded bytes per id
  std::unordered_map<std::string, int32_t> token_ids_;  // token text -> id
  std::unordered_map<uint64_t, int32_t> merge_rank_;    // (left << 32 | right) -> rank
  std::unordered_map<uint64_t, int32_t> merge_result_;  // (left << 32 | right) -> merged id
  std::array<int32_t, 256> byte_token_{};               // byte -> its single-byte token
};

}  // namespace cutline::model
