#pragma once
// How a raw text prompt becomes tokens, with the request fields beyond OpenAI's that vLLM and
// llama.cpp server accept:
//   "add_special_tokens": false   no BOS before the prompt (vLLM; default true)
//   "parse_special": false        control-token text ("<|im_start|>", "<s>") stays plain text;
//                                 user-defined tokens (<think>, <tool_call>) are still matched,
//                                 as llama.cpp does (llama.cpp's name; default: on unless the
//                                 backend runs with --no-parse-special)
// Used for /v1/completions prompts and POST /tokenize.

#include <cstdint>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/model/tokenizer.h"

namespace cutline::server {

struct PromptEncoding {
  bool add_special_tokens = true;
  bool parse_special = true;
};

// Reads the two fields from a JSON object body; `parse_special_default` applies when the body
// does not say. kBadRequest naming the field when one is not a boolean (`param` is set to it).
Result<PromptEncoding> prompt_encoding_of(std::string_view body, bool parse_special_default,
                                          std::string& param);

std::vector<int32_t> encode_prompt(const model::Tokenizer& tokenizer, std::string_view text,
                                   const PromptEncoding& encoding);

}  // namespace cutline::server
