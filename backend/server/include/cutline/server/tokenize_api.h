#pragma once
// POST /tokenize and POST /detokenize: the shapes vLLM and llama.cpp server offer, over a served
// model's tokenizer and chat template. Pure (body in, JSON out); the backend server holds the
// model's lease while it calls them.
//
//   /tokenize    {"model"?, "prompt": "..."} or {"model"?, "messages": [{role, content}, ...]}
//                  "add_special_tokens": BOS before a prompt (default true; for messages the
//                                        chat template writes its own, default false)
//                  "add_generation_prompt": for messages, end with the assistant header
//                                        (default true)
//                  "parse_special": special-token text in a prompt is the token (default true
//                                        unless --no-parse-special)
//                  "with_pieces": tokens as {"id", "piece"} objects (llama.cpp); a piece that
//                                        is not valid UTF-8 on its own is an array of bytes
//                → {"tokens": [...], "count": N, "max_model_len": N}
//   /detokenize  {"model"?, "tokens": [ids]} → {"prompt": "..."}; control tokens appear as
//                their text, bytes that do not form UTF-8 as U+FFFD.
//
// Bad input (not JSON, wrong types, neither or both of prompt and messages, an id out of
// range) is kBadRequest naming the field in `param`: an OpenAI-style 400.

#include <optional>
#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/server/completion_request.h"

namespace cutline::server {

// The "model" field of either body (nullopt when absent: the default model). kBadRequest when
// the body is not a JSON object or "model" is not a string.
Result<std::optional<std::string>> tokenize_model_of(std::string_view body);

Result<std::string> tokenize_json(std::string_view body, const ModelTextInfo& model,
                                  std::string& param);
Result<std::string> detokenize_json(std::string_view body, const ModelTextInfo& model,
                                    std::string& param);

}  // namespace cutline::server
