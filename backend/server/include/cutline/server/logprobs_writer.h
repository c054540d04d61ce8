#pragma once
// The OpenAI `logprobs` objects the backend writes from the engine's TokenLogprobs:
//   chat:        choices[].logprobs = {"content":[{"token","logprob","bytes":[..],
//                                      "top_logprobs":[{"token","logprob","bytes"}]}]}
//   completions: choices[].logprobs = {"tokens":[..],"token_logprobs":[..],
//                                      "top_logprobs":[{token: logprob}],"text_offset":[..]}
//                (each top_logprobs entry holds the alternatives and the sampled token)
// A token's text is its bytes when they are valid UTF-8, else OpenAI's "bytes:\xNN..." spelling
// (a byte-fallback piece of a multi-byte character); `bytes` always holds the raw bytes.
//
// insert_choice_logprobs splices the object into a body or chunk that proto::write_chunk /
// proto::write_completion wrote for one choice with no usage and no stop record (it ends with
// the choice's closing brace, "]}" ); append_top_level then adds those fields after it.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "cutline/engine/token_logprobs.h"
#include "cutline/model/tokenizer.h"

namespace cutline::server {

// The token's text as OpenAI writes it (valid UTF-8).
std::string logprob_token_text(const model::Tokenizer& tokenizer, int32_t token);

// Appends the chat items (comma-separated, a leading comma when `out` already holds items).
void append_chat_logprobs_items(std::string& out, std::span<const engine::TokenLogprobs> tokens,
                                const model::Tokenizer& tokenizer);
// {"content":[items]} around items from append_chat_logprobs_items.
std::string chat_logprobs_object(std::string_view items);

// The completions endpoint's column-wise layout, accumulated over a response (non-streaming) or
// written per chunk (streaming); text_offset keeps counting across chunks.
class CompletionLogprobs {
 public:
  explicit CompletionLogprobs(const model::Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  void add(std::span<const engine::TokenLogprobs> tokens);
  // The object for what was added since the last clear().
  std::string object() const;
  void clear();  // keeps the text offset

 private:
  const model::Tokenizer& tokenizer_;
  std::string tokens_, token_logprobs_, top_logprobs_, text_offset_;
  int64_t offset_ = 0;
};

// Inserts ,"logprobs":<object> into the last choice of `json` (see above). False when `json`
// does not end as a one-choice body without usage and record.
bool insert_choice_logprobs(std::string& json, std::string_view object);
// Adds ,"<key>":<raw JSON> as the last member of the top-level object `json`.
void append_top_level(std::string& json, std::string_view key, std::string_view raw);

}  // namespace cutline::server
