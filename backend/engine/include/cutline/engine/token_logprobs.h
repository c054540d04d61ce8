#pragma once
// Token log-probabilities, as OpenAI's `logprobs` / `top_logprobs` report them: for each sampled
// token, its log-probability and those of the most likely alternatives at that position.
//
// What they are computed from: the raw model output — the log-softmax of the row of logits the
// sampler received, before penalties, temperature, top-k/top-p/min-p (vLLM's default,
// `logprobs_mode=raw_logprobs`). They therefore describe the model, not the sampling settings,
// and compare directly with other engines' logprobs on the same model.
//
// LogprobsCalculator runs on the engine thread, only for sequences that asked for logprobs; it
// keeps scratch buffers between calls (one per engine).

#include <cstdint>
#include <span>
#include <vector>

namespace cutline::engine {

// Most alternatives a request may ask for (OpenAI's top_logprobs limit, vLLM's default).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0;
};

// One sampled token.
struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0;
  // The `n` most likely tokens at this position, most likely first (ties: lower id first); may
  // or may not contain `token`.
  std::vector<TopLogprob> top;
};

class LogprobsCalculator {
 public:
  // Fills `out` for the sampled `token` from its row of raw `logits`, with `top_n` alternatives
  // (0..kMaxTopLogprobs). Non-finite logits count as probability 0 (-inf logprob).
  void compute(std::span<const float> logits, int32_t token, int32_t top_n, TokenLogprobs& out);

 private:
  std::vector<int32_t> ids_;
};

}  // namespace cutline::engine
