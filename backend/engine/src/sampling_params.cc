#include "cutline/engine/sampling_params.h"

#include <cmath>

#include "cutline/engine/token_logprobs.h"

namespace cutline::engine {

std::string validate(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    return "temperature must be a finite number >= 0";
  if (p.top_k < 0) return "top_k must be >= 0";
  if (!(p.top_p > 0 && p.top_p <= 1)) return "top_p must be in (0, 1]";
  if (!(p.min_p >= 0 && p.min_p <= 1)) return "min_p must be in [0, 1]";
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0)
    return "repetition_penalty must be > 0";
  if (!std::isfinite(p.presence_penalty) || std::fabs(p.presence_penalty) > 2)
    return "presence_penalty must be in [-2, 2]";
  if (!std::isfinite(p.frequency_penalty) || std::fabs(p.frequency_penalty) > 2)
    return "frequency_penalty must be in [-2, 2]";
  if (p.logprobs < -1 || p.logprobs > kMaxTopLogprobs)
    return "top_logprobs must be in [0, " + std::to_string(kMaxTopLogprobs) + "]";
  return {};
}

}  // namespace cutline::engine
