#pragma once
// Special-token text in a raw prompt: "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
// names five special tokens, not 24 characters' worth of text. The text is partitioned the way
// llama.cpp's tokenizer does it (and vLLM through the Hugging Face tokenizers): for each special
// token, longest first, every occurrence in the text not yet claimed becomes that token; the text
// left between them is encoded as plain text, each fragment on its own (no BPE merge or
// SentencePiece piece crosses a special token; a SentencePiece tokenizer with add_space_prefix
// prefixes each fragment, as llama.cpp does after a special token).
//
// Who calls it: the backend server for /v1/completions prompts and POST /tokenize (unless the
// request or --no-parse-special turns it off).

#include <cstdint>
#include <string_view>
#include <vector>

#include "cutline/model/tokenizer.h"
#include "cutline/model/vocabulary.h"

namespace cutline::model {

struct PromptFragment {
  int32_t token = -1;     // >= 0: a special token
  std::string_view text;  // the fragment's text (the token's own text for a special token)
};

// The vocabulary's control, user-defined and unknown tokens, longest text first (ties by id), as
// the tokenizers return them from special_tokens(). Views into vocab.tokens.
std::vector<SpecialToken> collect_special_tokens(const Vocabulary& vocab);

// Partitions `text` into plain-text fragments and special tokens, in order. Empty text gives no
// fragments; text without special tokens gives one. Without `control`, only user-defined tokens
// are split out (llama.cpp and the Hugging Face tokenizers match those even when special tokens
// are not parsed: Qwen's <think>, <tool_call>).
std::vector<PromptFragment> split_special_tokens(const Tokenizer& tokenizer, std::string_view text,
                                                 bool control = true);

// encode() with special-token text parsed: BOS first when add_bos (and the model adds one).
std::vector<int32_t> encode_with_special_tokens(const Tokenizer& tokenizer, std::string_view text,
                                                bool add_bos, bool control = true);

// Drops ASCII white space at the start (after a token with rstrip).
std::string_view strip_leading_space(std::string_view s);
// Whether the special token `id` takes the white space after it (SpecialToken::rstrip).
bool strips_right(const Tokenizer& tokenizer, int32_t id);

// The text a token stands for when shown to a user: its bytes, or its vocabulary text for a
// control token (which decodes to nothing). For /detokenize and token pieces.
std::string_view token_display_text(const Tokenizer& tokenizer, int32_t id);

}  // namespace cutline::model
