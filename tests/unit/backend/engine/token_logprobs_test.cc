#include "cutline/engine/token_logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "engine_harness.h"

namespace cutline::engine {
namespace {

using testing::FakeRunner;
using testing::FakeTokenizer;
using testing::make_engine;

TEST(LogprobsCalculator, IsTheLogSoftmaxOfTheRawLogits) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l));
  LogprobsCalculator calc;
  TokenLogprobs out;
  calc.compute(logits, 2, 3, out);
  EXPECT_EQ(out.token, 2);
  EXPECT_NEAR(out.logprob, 2.0 - std::log(z), 1e-6);
  // Most likely first; the tie between ids 1 and 3 goes to the lower id.
  ASSERT_EQ(out.top.size(), 3u);
  EXPECT_EQ(out.top[0].token, 1);
  EXPECT_EQ(out.top[1].token, 3);
  EXPECT_EQ(out.top[2].token, 2);
  EXPECT_NEAR(out.top[0].logprob, 3.0 - std::log(z), 1e-6);
  EXPECT_FLOAT_EQ(out.top[2].logprob, out.logprob);

  // No alternatives asked: none computed; more than the vocabulary: clamped.
  calc.compute(logits, 4, 0, out);
  EXPECT_TRUE(out.top.empty());
  EXPECT_NEAR(out.logprob, -1.0 - std::log(z), 1e-6);
  calc.compute(logits, 0, kMaxTopLogprobs, out);
  EXPECT_EQ(out.top.size(), logits.size());
}

TEST(LogprobsCalculator, NonFiniteLogitsHaveProbabilityZero) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {-inf, 0.0f, std::nanf(""), 0.0f};
  LogprobsCalculator calc;
  TokenLogprobs out;
  calc.compute(logits, 1, 4, out);
  EXPECT_NEAR(out.logprob, std::log(0.5), 1e-6);
  ASSERT_EQ(out.top.size(), 4u);
  EXPECT_EQ(out.top[0].token, 1);
  EXPECT_EQ(out.top[1].token, 3);
  EXPECT_TRUE(std::isinf(out.top[2].logprob) && out.top[2].logprob < 0);
}

TEST(SamplingParams, LogprobsBounds) {
  SamplingParams p;
  EXPECT_TRUE(validate(p).empty());  // -1: none
  p.logprobs = 0;
  EXPECT_TRUE(validate(p).empty());
  p.logprobs = kMaxTopLogprobs;
  EXPECT_TRUE(validate(p).empty());
  p.logprobs = kMaxTopLogprobs + 1;
  EXPECT_FALSE(validate(p).empty());
  p.logprobs = -2;
  EXPECT_FALSE(validate(p).empty());
}

struct LogprobsRun {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
};

LogprobsRun run_one(float temperature, int32_t logprobs) {
  FakeRunner runner(64, 256);
  FakeTokenizer tok;
  auto engine = make_engine(runner, tok, {});
  AddRequest r;
  r.prompt = {3, 4, 5, 6};
  r.stop.max_tokens = 12;
  r.stop.ignore_eos = true;
  r.sampling.seed = 11;
  r.sampling.temperature = temperature;
  r.sampling.logprobs = logprobs;
  EXPECT_TRUE(engine->add(std::move(r)).ok());
  LogprobsRun run;
  std::vector<EngineEvent> events;
  while (!engine->idle()) {
    engine->step();
    events.clear();
    engine->drain_events(events);
    for (auto& e : events) {
      // One entry per sampled token, or none when not asked for.
      EXPECT_EQ(e.logprobs.size(), logprobs >= 0 ? e.tokens.size() : 0u);
      run.tokens.insert(run.tokens.end(), e.tokens.begin(), e.tokens.end());
      run.logprobs.insert(run.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    }
  }
  return run;
}

TEST(EngineLogprobs, SentWithEachTokenFromTheRawLogits) {
  const LogprobsRun greedy = run_one(0.0f, 5);
  ASSERT_EQ(greedy.tokens.size(), 12u);
  ASSERT_EQ(greedy.logprobs.size(), 12u);
  for (size_t i = 0; i < greedy.tokens.size(); ++i) {
    const TokenLogprobs& lp = greedy.logprobs[i];
    EXPECT_EQ(lp.token, greedy.tokens[i]);
    ASSERT_EQ(lp.top.size(), 5u);
    // Greedy picks the most likely token, so it heads the alternatives.
    EXPECT_EQ(lp.top[0].token, lp.token);
    EXPECT_FLOAT_EQ(lp.top[0].logprob, lp.logprob);
    double mass = 0;
    for (size_t k = 0; k < lp.top.size(); ++k) {
      if (k > 0) {
        EXPECT_LE(lp.top[k].logprob, lp.top[k - 1].logprob);
      }
      mass += std::exp(lp.top[k].logprob);
    }
    EXPECT_LT(mass, 1.0);
    EXPECT_LT(lp.logprob, 0.0f);
  }

  // Raw logprobs: the temperature changes what is sampled, not the reported distribution. A hot
  // run reports, at its first token (same prompt, same logits), the same alternatives.
  const LogprobsRun hot = run_one(1.5f, 5);
  ASSERT_FALSE(hot.logprobs.empty());
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(hot.logprobs[0].top[k].token, greedy.logprobs[0].top[k].token);
    EXPECT_FLOAT_EQ(hot.logprobs[0].top[k].logprob, greedy.logprobs[0].top[k].logprob);
  }
  // Asking for logprobs does not change the tokens; not asking sends none.
  EXPECT_EQ(run_one(1.5f, -1).tokens, hot.tokens);
  EXPECT_EQ(run_one(1.5f, 0).tokens, hot.tokens);
  EXPECT_TRUE(run_one(1.5f, -1).logprobs.empty());
}

}  // namespace
}  // namespace cutline::engine
