#pragma once
// StopConditions: when a sequence ends besides EOS and the context window. Checked after each
// sampled token in this order, so that every finished sequence has exactly one cause:
//   1. an EOS/EOT id of the tokenizer (unless ignore_eos)       -> Cause::kEos
//   2. one of stop_token_ids                                     -> Cause::kStopSequence
//   3. one of stop_strings matched in the decoded output bytes    -> Cause::kStopSequence
//      (across token boundaries; the matched text and anything after it is not emitted)
//   4. max_tokens output tokens reached                          -> Cause::kClientMaxTokens
//   5. prompt + output tokens reached the model's context_length -> Cause::kContextLength

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cutline::engine {

struct StopConditions {
  std::vector<std::string> stop_strings;  // empty strings are ignored
  std::vector<int32_t> stop_token_ids;
  std::optional<int64_t> max_tokens;  // the client's max_tokens (absent: context window only)
  bool ignore_eos = false;
};

}  // namespace cutline::engine
