#pragma once
// The logprobs fields of a chat or completions request, which proto's ParsedRequest does not
// carry: chat `logprobs` (bool) and `top_logprobs` (0..20, only with logprobs: true), completions
// `logprobs` (an integer 0..20: that many alternatives per token). Read from the body that
// proto::RequestParser already validated.

#include <cstdint>

#include "cutline/base/result.h"
#include "cutline/proto/wire/openai_request.h"
#include "cutline/server/completion_request.h"

namespace cutline::server {

// -1: no logprobs; else the number of alternatives per token (engine::SamplingParams::logprobs).
// A 400 naming the field for a wrong type or a value out of range.
Result<int32_t> requested_logprobs(const proto::ParsedRequest& request, RequestErrorDetail& detail);

}  // namespace cutline::server
