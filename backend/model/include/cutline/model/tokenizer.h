#pragma once
// Tokenizer: text <-> token ids for a model, built from GGUF metadata (byte-level BPE "gpt2" or
// SentencePiece "llama"). Used by the backend server (prompts, streaming output) and the engine
// (stop strings are matched on the bytes tokens decode to).
//
// Special tokens (BOS/EOS/EOT and token_type control tokens) are never produced from plain text
// by encode(); encode_with_special_tokens() (special_tokens.h) parses their text in a raw prompt.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cutline::model {

// A token whose text a raw prompt may name: control, user-defined and unknown tokens.
struct SpecialToken {
  std::string_view text;  // as stored in the vocabulary, e.g. "<|start_header_id|>"
  int32_t id = -1;
  bool control = false;  // kControl or kUnknown (user-defined tokens are not)
  bool rstrip = false;   // white space right after the token is dropped (Vocabulary)
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual int32_t vocab_size() const = 0;
  // Encodes plain text; prepends BOS when add_bos and the model has one.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;
  // The raw bytes this token stands for in output (may be part of a UTF-8 character; empty for
  // control tokens). Valid for the tokenizer's lifetime.
  virtual std::string_view token_bytes(int32_t id) const = 0;
  // Token id of a special token given by its text (e.g. "<|im_end|>"), or -1.
  virtual int32_t special_token_id(std::string_view text) const = 0;

  virtual int32_t bos_id() const = 0;  // -1 when none
  // Every id that ends generation (EOS, EOT, <|im_end|>, <|eot_id|> ...).
  virtual std::span<const int32_t> eos_ids() const = 0;
  bool is_eos(int32_t id) const {
    for (int32_t e : eos_ids())
      if (e == id) return true;
    return false;
  }
  virtual bool is_control(int32_t id) const = 0;
  // The special tokens, longest text first (ties by id). Views valid for the tokenizer's lifetime.
  virtual std::span<const SpecialToken> special_tokens() const { return {}; }

  // Concatenated bytes of the tokens (control tokens contribute nothing).
  std::string decode(std::span<const int32_t> ids) const {
    std::string out;
    for (int32_t id : ids) out.append(token_bytes(id));
    return out;
  }
};

// Streaming detokenizer: feeds token bytes and releases only complete UTF-8 characters, so a
// client never receives half a character. Invalid sequences are released as U+FFFD.
class Utf8Streamer {
 public:
  // Appends the token's bytes; returns the text that is now complete (may be empty).
  std::string push(std::string_view bytes);
  // Releases whatever is pending at end of stream (an incomplete tail becomes U+FFFD).
  std::string flush();

 private:
  std::string pending_;
};

}  // namespace cutline::model
