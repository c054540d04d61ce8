#include "cutline/engine/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cutline::engine {

void LogprobsCalculator::compute(std::span<const float> logits, int32_t token, int32_t top_n,
                                 TokenLogprobs& out) {
  const auto vocab = static_cast<int32_t>(logits.size());
  out.token = token;
  out.top.clear();
  if (vocab == 0) {
    out.logprob = 0;
    return;
  }
  // log-softmax in double precision: logprob(i) = logit(i) - (max + log(sum(exp(logit - max)))).
  double max_logit = -std::numeric_limits<double>::infinity();
  for (float l : logits)
    if (std::isfinite(l)) max_logit = std::max<double>(max_logit, l);
  double sum = 0;
  if (std::isfinite(max_logit))
    for (float l : logits)
      if (std::isfinite(l)) sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_z = std::isfinite(max_logit) ? max_logit + std::log(sum) : 0.0;
  auto logprob = [&](int32_t id) -> float {
    const float l = logits[static_cast<size_t>(id)];
    if (!std::isfinite(l) || !std::isfinite(max_logit))
      return -std::numeric_limits<float>::infinity();
    return static_cast<float>(static_cast<double>(l) - log_z);
  };
  out.logprob = token >= 0 && token < vocab ? logprob(token) : 0.0f;

  const int32_t n = std::clamp(top_n, 0, std::min(vocab, kMaxTopLogprobs));
  if (n == 0) return;
  // The n best by (logit desc, id asc): partial sort of the ids, O(vocab log n).
  auto key = [&](int32_t id) {
    const float l = logits[static_cast<size_t>(id)];
    return std::isfinite(l) ? l : -std::numeric_limits<float>::infinity();
  };
  auto before = [&](int32_t a, int32_t b) {
    const float ka = key(a), kb = key(b);
    return ka > kb || (ka == kb && a < b);
  };
  ids_.resize(static_cast<size_t>(vocab));
  for (int32_t i = 0; i < vocab; ++i) ids_[static_cast<size_t>(i)] = i;
  std::partial_sort(ids_.begin(), ids_.begin() + n, ids_.end(), before);
  out.top.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) out.top.push_back({ids_[i], logprob(ids_[i])});
}

}  // namespace cutline::engine
