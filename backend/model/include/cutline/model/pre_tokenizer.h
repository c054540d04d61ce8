#pragma once
// Pre-tokenizers for byte-level BPE: split text into the chunks that BPE merges never cross,
// hand-written equivalents of the regexes the models were trained with (no regex library).
//
//   kGpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   kLlama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   kQwen2:  as kLlama3 but \p{N} (single digits)
//
// Splitting only chooses chunk boundaries: the chunks always concatenate back to the input, so
// round trips hold whatever the classification of a character. Invalid UTF-8 bytes are treated
// as single "other" characters.

#include <string_view>
#include <vector>

namespace cutline::model {

enum class PreTokenizer { kGpt2, kLlama3, kQwen2 };

// Maps tokenizer.ggml.pre ("llama-bpe", "llama3", "qwen2", "smollm", "gpt-2", "default", ...);
// unknown names fall back to kGpt2.
PreTokenizer pre_tokenizer_from_name(std::string_view name);

// Appends the chunks of `text` (views into it) to `out`.
void pre_tokenize(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& out);

}  // namespace cutline::model
