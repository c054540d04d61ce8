#pragma once
// Vocabulary: the token table a tokenizer is built from (GGUF tokenizer.ggml.* metadata): token
// texts, SentencePiece scores, token types and the special ids. Shared by the BPE and
// SentencePiece tokenizers; built by load_tokenizer() or by hand in tests.

#include <cstdint>
#include <string>
#include <vector>

namespace cutline::model {

// tokenizer.ggml.token_type values.
enum class TokenKind : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Vocabulary {
  std::vector<std::string> tokens;  // as stored (byte-level BPE: GPT-2 unicode-mapped text)
  std::vector<float> scores;        // SentencePiece piece scores (empty for BPE)
  std::vector<TokenKind> kinds;     // same length as tokens (kNormal when the file has none)
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;  // end of turn (<|eot_id|>, <|im_end|>, <end_of_turn>) when known
  int32_t unk_id = -1;
  bool add_bos = false;  // tokenizer.ggml.add_bos_token (default: true for SentencePiece)
  // Phi-3 (general.architecture "phi3"): white space after a special token other than <unk>,
  // <s> and <|endoftext|> belongs to the token (its tokenizer.json's "rstrip"; llama.cpp does the
  // same for that architecture).
  bool special_rstrip = false;
  // Every id that ends generation: eos, eot, and control tokens known to end a turn.
  std::vector<int32_t> eos_ids;

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
};

}  // namespace cutline::model
