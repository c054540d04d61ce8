#pragma once
// Sampler: picks one token from a row of logits under SamplingParams. Deterministic: the result
// depends only on (logits, params, seed, token_index, the sequence's own tokens). Probabilities
// are accumulated in double precision in a fixed order — token id order for plain temperature
// sampling (O(vocab), no sort), best first ((logit desc, id asc)) when top-k, top-p or min-p
// keep a prefix of that order (only the head that can be kept is sorted) — so equal inputs give
// the same token on any thread, batch or step.
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
    double prob;
  };
  // Best first: logit descending, then id ascending (a functor, so that the sorts inline it).
  struct Before {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    }
  };
  void apply_penalties(const SamplingParams& params, std::span<const int32_t> prompt,
                       std::span<const int32_t> output);
  void softmax(size_t n);
  size_t keep_nucleus_and_min_p(const SamplingParams& params, size_t n, bool sorted);
  std::vector<float> work_;
  std::vector<Candidate> candidates_;
  std::vector<int32_t> counts_;
  std::vector<int32_t> touched_;
};

}  // namespace cutline::engine
