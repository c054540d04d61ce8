#pragma once
// SamplingParams: how one sequence picks its next token (OpenAI request fields plus the common
// extensions). Applied in this order by Sampler: repetition/presence/frequency penalties,
// temperature (0 = greedy), top-k, softmax, top-p, min-p, then one draw from the sequence's
// own counter-based random stream (batch-invariant, see sampler.h).

#include <cstdint>
#include <optional>
#include <string>

namespace cutline::engine {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy (argmax, lowest id on ties)
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off; keep the smallest set with cumulative probability >= top_p
  float min_p = 0.0f;        // 0: off; drop tokens with p < min_p * p_max
  // > 1 discourages tokens already in the prompt or output (logit / penalty if positive,
  // logit * penalty if negative; CTRL/HF convention). 1: off.
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;   // subtracted once from tokens present in the output
  float frequency_penalty = 0.0f;  // subtracted per occurrence in the output
  // The random stream's seed. Absent: the engine draws one from its injected seed source and
  // reports it in the SequenceRecord, so that any run can be replayed.
  std::optional<uint64_t> seed;
  // Log-probabilities reported with each sampled token (token_logprobs.h): -1 none (no cost);
  // 0..kMaxTopLogprobs the sampled token's plus that many most likely alternatives. They come
  // from the raw logits and do not change what is sampled.
  int32_t logprobs = -1;
};

// An error message when the parameters are out of range, or empty when they are valid.
std::string validate(const SamplingParams& params);

}  // namespace cutline::engine
