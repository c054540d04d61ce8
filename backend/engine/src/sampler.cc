#include "cutline/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cutline/engine/counter_rng.h"

namespace cutline::engine {

int32_t Sampler::sample(std::span<const float> logits, const SamplingParams& p, uint64_t seed,
                        int64_t token_index, std::span<const int32_t> prompt,
                        std::span<const int32_t> output) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  if (vocab == 0) return 0;
  work_.assign(logits.begin(), logits.end());
  apply_penalties(p, prompt, output);

  if (p.temperature == 0.0f) {
    int32_t best = 0;
    for (int32_t i = 1; i < vocab; ++i)
      if (work_[i] > work_[best]) best = i;  // lowest id wins ties
    return best;
  }

  candidates_.resize(vocab);
  for (int32_t i = 0; i < vocab; ++i) candidates_[i] = {i, work_[i] / p.temperature, 0.0};
  size_t n = candidates_.size();
  bool sorted = false;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + p.top_k, candidates_.end(),
                      Before{});
    n = static_cast<size_t>(p.top_k);
    sorted = true;
  }
  softmax(n);
  n = keep_nucleus_and_min_p(p, n, sorted);

  double total = 0;
  for (size_t i = 0; i < n; ++i) total += candidates_[i].prob;
  const double u = counter_uniform(seed, static_cast<uint64_t>(token_index)) * total;
  double cum = 0;
  for (size_t i = 0; i < n; ++i) {
    cum += candidates_[i].prob;
    if (u < cum) return candidates_[i].id;
  }
  return candidates_[n - 1].id;
}

// Penalties on work_. Repetition looks at prompt and output; presence and frequency at the
// output.
void Sampler::apply_penalties(const SamplingParams& p, std::span<const int32_t> prompt,
                              std::span<const int32_t> output) {
  const int32_t vocab = static_cast<int32_t>(work_.size());
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!repetition && !additive) return;
  if (static_cast<int32_t>(counts_.size()) < vocab) counts_.assign(vocab, 0);
  touched_.clear();
  auto seen = [&](int32_t id, bool in_output) {
    if (id < 0 || id >= vocab) return;
    // counts_: bit 0x40000000 marks "seen anywhere"; the low bits count output occurrences.
    if (counts_[id] == 0) touched_.push_back(id);
    counts_[id] |= 0x40000000;
    if (in_output) ++counts_[id];
  };
  for (int32_t id : prompt) seen(id, false);
  for (int32_t id : output) seen(id, true);
  std::sort(touched_.begin(), touched_.end());
  for (int32_t id : touched_) {
    float& l = work_[id];
    if (repetition) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    const int32_t n_out = counts_[id] & 0x3FFFFFFF;
    if (n_out > 0) l -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n_out);
    counts_[id] = 0;
  }
}

// Softmax over the kept candidates [0, n) in their order (id order, or best first after top-k),
// in double precision. Plain temperature sampling needs no sort at all: O(vocab).
void Sampler::softmax(size_t n) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < n; ++i) max_logit = std::max<double>(max_logit, candidates_[i].logit);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = std::isfinite(candidates_[i].logit)
                         ? std::exp(static_cast<double>(candidates_[i].logit) - max_logit)
                         : 0.0;
    candidates_[i].prob = e;
    sum += e;
  }
  for (size_t i = 0; i < n; ++i) candidates_[i].prob /= sum;
}

// top-p and min-p keep a best-first prefix of candidates [0, n): sorts only as much of the head
// as they can keep, growing it until the cut falls inside (rarely past the first 64
// candidates). Returns the prefix's length (n when neither applies).
size_t Sampler::keep_nucleus_and_min_p(const SamplingParams& p, size_t n, bool sorted) {
  const bool nucleus = p.top_p<1.0f, use_min_p = p.min_p> 0.0f;
  // A small tolerance so that a nucleus of exactly top_p (0.5 + 0.3 for 0.8) is not widened by
  // rounding.
  const double target = static_cast<double>(p.top_p) - 1e-6;
  if ((nucleus || use_min_p) && !sorted) {
    for (size_t m = std::min<size_t>(n, 64);; m = std::min(n, m * 4)) {
      std::partial_sort(candidates_.begin(), candidates_.begin() + m, candidates_.begin() + n,
                        Before{});
      if (m == n) break;
      double cum = 0;
      for (size_t i = 0; i < m; ++i) cum += candidates_[i].prob;
      if (nucleus && cum >= target) break;
      if (use_min_p && candidates_[m - 1].prob < p.min_p * candidates_[0].prob) break;
    }
  }
  if (nucleus) {
    double cum = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += candidates_[i].prob;
      if (cum >= target) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (use_min_p) {
    const double threshold = p.min_p * candidates_[0].prob;
    size_t keep = 1;
    while (keep < n && candidates_[keep].prob >= threshold) ++keep;
    n = keep;
  }
  return n;
}

}  // namespace cutline::engine
