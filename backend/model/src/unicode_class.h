#pragma once
// Minimal Unicode support for the pre-tokenizers: UTF-8 decoding that never fails (an invalid
// byte decodes as itself with kInvalid) and the three classes the GPT-2 / Llama 3 / Qwen2 split
// patterns use: letters (\p{L}), numbers (\p{N}) and white space (\s). The tables cover the
// scripts in common use; a character outside them counts as "other", which moves a chunk
// boundary but never breaks a round trip.

#include <cstdint>
#include <string_view>

namespace cutline::model {

constexpr uint32_t kInvalidCodePoint = 0xFFFFFFFF;

// Decodes the character at text[pos]; sets `len` to its byte length (1 for an invalid byte,
// returned as kInvalidCodePoint).
uint32_t decode_utf8(std::string_view text, size_t pos, size_t& len);

enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };
CharClass char_class(uint32_t cp);

}  // namespace cutline::model
