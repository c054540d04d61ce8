#pragma once
// load_tokenizer: builds the model's Tokenizer from GGUF metadata (tokenizer.ggml.model "gpt2"
// -> BpeTokenizer with tokenizer.ggml.pre, "llama" -> SpmTokenizer). Errors name the file and the
// key ("m.gguf: metadata key 'tokenizer.ggml.merges' is missing (required for gpt2 tokenizers)");
// other tokenizer models are kUnsupported by name.

#include <memory>

#include "cutline/base/result.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/tokenizer.h"
#include "cutline/model/vocabulary.h"

namespace cutline::model {

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const GgufFile& file);

// The Vocabulary part alone (tokens, scores, types, special ids, eos set).
Result<Vocabulary> load_vocabulary(const GgufFile& file);

}  // namespace cutline::model
