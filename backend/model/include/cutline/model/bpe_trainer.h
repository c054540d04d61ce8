#pragma once
// BPE training for the built-in tiny model's vocabulary: learns byte-level merges from a text,
// deterministically (ties broken by the smaller pair of token ids), pre-tokenized like the model
// will be at run time so that learned merges never cross a chunk boundary.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/model/pre_tokenizer.h"

namespace cutline::model {

struct BpeVocabulary {
  // GPT-2 unicode-mapped token texts: the 256 byte tokens (in byte order), then the result of
  // each merge in rank order (a merge whose result already exists adds no token).
  std::vector<std::string> tokens;
  // "left right" merges in rank order.
  std::vector<std::string> merges;
};

// Learns merges until the vocabulary holds 256 + `n_merges` tokens or no pair occurs twice.
BpeVocabulary train_bpe(std::string_view text, int32_t n_merges, PreTokenizer pre);

// GPT-2's reversible byte <-> printable-unicode mapping used by byte-level BPE vocabularies.
std::string_view byte_to_unicode(uint8_t byte);  // UTF-8 of the mapped code point
// Inverse over a whole token text; false when some character is not a mapped byte.
bool unicode_to_bytes(std::string_view token_text, std::string& out);

}  // namespace cutline::model
