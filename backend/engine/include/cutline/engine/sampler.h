#pragma once
// Sampler: picks one token from a row of logits under SamplingParams. Deterministic: the result
// depends only on (logits, params, seed, token_index, the sequence's own tokens). Candidates are
// ordered by (logit desc, id asc) and probabilities are accumulated in that fixed order in double
// precision, so equal inputs give the same token on any thread, batch or step.
//
// One Sampler per engine (it keeps scratch buffers); called on the engine thread only.

#include <cstdint>
#include <span>
#include <vector>

#include "cutline/engine/sampling_params.h"

namespace cutline::engine {

class Sampler {
 public:
  // `prompt` and `output` are the sequence's tokens so far (for the penalties); `token_index` is
  // the index of the token being sampled among the outputs (0 for the first), which selects the
  // draw of the counter-based stream `seed`.
  int32_t sample(std::span<const float> logits, const SamplingParams& params, uint64_t seed,
                 int64_t token_index, std::span<const int32_t> prompt,
                 std::span<const int32_t> output);

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };
  std::vector<float> work_;
  std::vector<Candidate> candidates_;
  std::vector<double> probs_;
  std::vector<int32_t> counts_;
  std::vector<int32_t> touched_;
};

}  // namespace cutline::engine
