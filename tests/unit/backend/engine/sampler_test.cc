#include "cutline/engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cutline/engine/counter_rng.h"

namespace cutline::engine {
namespace {

std::vector<double> softmax(const std::vector<float>& l, double temperature) {
  std::vector<double> p(l.size());
  double mx = -1e300, sum = 0;
  for (float x : l) mx = std::max(mx, x / temperature);
  for (size_t i = 0; i < l.size(); ++i) sum += p[i] = std::exp(l[i] / temperature - mx);
  for (double& x : p) x /= sum;
  return p;
}

std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, const SamplingParams& p,
                           int draws, uint64_t seed = 5) {
  std::vector<int> h(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++h[s.sample(logits, p, seed, i, {}, {})];
  return h;
}

TEST(CounterRng, IsAPureFunctionOfSeedAndIndexAndUniform) {
  EXPECT_EQ(counter_bits(1, 2), counter_bits(1, 2));
  EXPECT_NE(counter_bits(1, 2), counter_bits(1, 3));
  EXPECT_NE(counter_bits(1, 2), counter_bits(2, 2));
  double sum = 0;
  int below_tenth = 0;
  for (int i = 0; i < 100000; ++i) {
    double u = counter_uniform(77, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    below_tenth += u < 0.1;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
  EXPECT_NEAR(below_tenth / 100000.0, 0.1, 0.005);
}

TEST(Sampler, GreedyPicksArgmaxAndLowestIdOnTies) {
  Sampler s;
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(s.sample(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f}, p, 1, 0, {}, {}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{5.0f, 1.0f, 5.0f}, p, 1, 0, {}, {}), 0);
}

TEST(Sampler, SameSeedAndIndexSameTokenOtherwiseVaries) {
  Sampler s;
  std::vector<float> logits(50, 0.0f);
  SamplingParams p;
  std::vector<int32_t> a, b, c;
  for (int i = 0; i < 40; ++i) {
    a.push_back(s.sample(logits, p, 11, i, {}, {}));
    b.push_back(s.sample(logits, p, 11, i, {}, {}));
    c.push_back(s.sample(logits, p, 12, i, {}, {}));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Sampler, DistributionMatchesSoftmaxWithTemperature) {
  Sampler s;
  std::vector<float> logits{1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
  for (float temperature : {1.0f, 0.5f, 2.0f}) {
    SamplingParams p;
    p.temperature = temperature;
    const int n = 40000;
    auto h = histogram(s, logits, p, n);
    auto expected = softmax(logits, temperature);
    for (size_t i = 0; i < logits.size(); ++i) {
      const double sd = std::sqrt(expected[i] * (1 - expected[i]) / n);
      EXPECT_NEAR(h[i] / static_cast<double>(n), expected[i], 5 * sd + 1e-9)
          << "token " << i << " temperature " << temperature;
    }
  }
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  Sampler s;
  std::vector<float> logits{1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
  SamplingParams p;
  p.top_k = 2;
  auto h = histogram(s, logits, p, 20000);
  EXPECT_EQ(h[0] + h[2] + h[3], 0);
  // Renormalized over {1, 4}: p(1) = e^2 / (e^2 + e^1.5).
  const double p1 = std::exp(2.0) / (std::exp(2.0) + std::exp(1.5));
  EXPECT_NEAR(h[1] / 20000.0, p1, 0.02);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  Sampler s;
  // Probabilities 0.5, 0.3, 0.15, 0.05.
  std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.top_p = 0.8f;
  auto h = histogram(s, logits, p, 20000);
  EXPECT_EQ(h[2] + h[3], 0);
  EXPECT_NEAR(h[0] / 20000.0, 0.5 / 0.8, 0.02);
}

// A wide nucleus (hundreds of tokens of a 2,000-token vocabulary) is found past the first 64
// candidates the sampler sorts: every sampled token is in the reference nucleus (full sort),
// and most draws are tokens ranked past 64 (as the renormalized nucleus says they should be).
TEST(Sampler, TopPFindsANucleusWiderThanTheFirstSortedBlock) {
  Sampler s;
  std::vector<float> logits(2000);
  for (size_t i = 0; i < logits.size(); ++i)
    logits[i] = static_cast<float>(counter_uniform(3, i)) * 0.5f;
  SamplingParams p;
  p.top_p = 0.5f;
  const std::vector<double> probs = softmax(logits, 1.0);
  std::vector<int> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<int> rank(logits.size());
  double cum = 0;
  size_t keep = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    rank[order[i]] = static_cast<int>(i);
    if (keep == 0 && (cum += probs[order[i]]) >= 0.5 - 1e-6) keep = i + 1;
  }
  ASSERT_GT(keep, 256u);
  const int n = 2000;
  const std::vector<int> h = histogram(s, logits, p, n);
  int past_64 = 0;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (rank[id] >= static_cast<int>(keep)) {
      EXPECT_EQ(h[id], 0) << "token " << id;
    }
    if (rank[id] >= 64) past_64 += h[id];
  }
  double mass = 0, mass_past_64 = 0;
  for (size_t i = 0; i < keep; ++i) (i < 64 ? mass : mass_past_64) += probs[order[i]];
  const double expected = mass_past_64 / (mass + mass_past_64);
  EXPECT_NEAR(past_64 / static_cast<double>(n), expected, 0.05);
}

TEST(Sampler, MinPDropsTokensBelowFractionOfTheBest) {
  Sampler s;
  std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.min_p = 0.25f;  // threshold 0.125: keeps 0.5, 0.3, 0.15
  auto h = histogram(s, logits, p, 20000);
  EXPECT_EQ(h[3], 0);
  EXPECT_GT(h[2], 0);
}

TEST(Sampler, PenaltiesDiscourageRepeatedTokens) {
  Sampler s;
  SamplingParams p;
  p.temperature = 0;
  std::vector<float> logits{2.0f, 1.9f, 1.0f};
  std::vector<int32_t> output{0};
  EXPECT_EQ(s.sample(logits, p, 1, 0, {}, output), 0);
  p.presence_penalty = 0.2f;
  EXPECT_EQ(s.sample(logits, p, 1, 0, {}, output), 1);
  p.presence_penalty = 0;
  p.frequency_penalty = 0.06f;
  std::vector<int32_t> twice{0, 0};
  EXPECT_EQ(s.sample(logits, p, 1, 0, {}, output), 0);  // 2.0 - 0.06 > 1.9
  EXPECT_EQ(s.sample(logits, p, 1, 0, {}, twice), 1);   // 2.0 - 0.12 < 1.9
  p.frequency_penalty = 0;
  p.repetition_penalty = 1.1f;  // applies to prompt tokens too
  std::vector<int32_t> prompt{0};
  EXPECT_EQ(s.sample(logits, p, 1, 0, prompt, {}), 1);  // 2.0 / 1.1 < 1.9
  // Penalties do not leak into the next call.
  p.repetition_penalty = 1.0f;
  EXPECT_EQ(s.sample(logits, p, 1, 0, {}, {}), 0);
}

TEST(Sampler, ValidateRejectsOutOfRangeParameters) {
  SamplingParams p;
  EXPECT_EQ(validate(p), "");
  p.temperature = -1;
  EXPECT_NE(validate(p), "");
  p = {};
  p.top_p = 1.5f;
  EXPECT_NE(validate(p), "");
  p = {};
  p.repetition_penalty = 0;
  EXPECT_NE(validate(p), "");
  p = {};
  p.presence_penalty = 3;
  EXPECT_NE(validate(p), "");
}

}  // namespace
}  // namespace cutline::engine
