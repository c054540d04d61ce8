#pragma once
// SpmTokenizer: SentencePiece BPE as llama.cpp runs it (GGUF tokenizer.ggml.model = "llama";
// Llama 2, Mistral, TinyLlama, Gemma): spaces become U+2581 "▁", a "▁" is prepended to the text
// (add_space_prefix), adjacent pieces are merged highest score first while the merge is a
// vocabulary piece, and bytes left without a piece become byte-fallback tokens <0xNN>.
// Decoding maps "▁" back to a space, so decode(encode(s)) == " " + s when add_space_prefix (the
// prefix the model was trained with; generated tokens need their leading spaces) and == s
// otherwise.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/model/tokenizer.h"
#include "cutline/model/vocabulary.h"

namespace cutline::model {

class SpmTokenizer final : public Tokenizer {
 public:
  // kBadRequest when the vocabulary lacks a byte-fallback token <0xNN> for some byte and has no
  // unknown token, or scores do not match tokens.
  static Result<std::unique_ptr<SpmTokenizer>> create(Vocabulary vocab, bool add_space_prefix);

  int32_t vocab_size() const override { return vocab_.size(); }
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override;
  // Token bytes with "▁" as space; byte tokens <0xNN> as that byte.
  std::string_view token_bytes(int32_t id) const override;
  int32_t special_token_id(std::string_view text) const override;
  int32_t bos_id() const override { return vocab_.bos_id; }
  std::span<const int32_t> eos_ids() const override { return vocab_.eos_ids; }
  bool is_control(int32_t id) const override;
  std::span<const SpecialToken> special_tokens() const override { return specials_; }

  // True when encode() prepends "▁": the first decoded byte of the output is then a space the
  // user did not type (llama.cpp drops it when detokenizing the start of a sequence).
  bool add_space_prefix() const { return add_space_prefix_; }

 private:
  SpmTokenizer() = default;
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;

  Vocabulary vocab_;
  bool add_space_prefix_ = true;
  std::vector<std::string> bytes_;                           // decoded bytes per id
  std::unordered_map<std::string_view, int32_t> piece_ids_;  // mergeable pieces (normal, user)
  std::unordered_map<std::string_view, int32_t> special_ids_;
  std::vector<SpecialToken> specials_;     // views into vocab_.tokens, longest first
  std::array<int32_t, 256> byte_token_{};  // <0xNN> ids, -1 when absent
};

}  // namespace cutline::model
