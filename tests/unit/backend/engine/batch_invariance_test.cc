// Batch invariance on the fake runner: a sequence's tokens are bitwise identical alone or among
// 1, 3 or 7 others, with or without chunked prefill, with or without the prefix cache, and after
// preemptions. (tiny_model/ repeats this on the real synthesized model.)
#include <gtest/gtest.h>

#include "engine_harness.h"

namespace cutline::engine {
namespace {

using testing::FakeRunner;
using testing::FakeTokenizer;
using testing::make_engine;
using testing::make_prompt;
using testing::run_until_idle;

AddRequest target_request() {
  AddRequest r;
  r.prompt = make_prompt(2024, 45);
  r.sampling.temperature = 0.9f;
  r.sampling.top_k = 30;
  r.sampling.top_p = 0.95f;
  r.sampling.repetition_penalty = 1.1f;
  r.sampling.seed = 42;
  r.stop.max_tokens = 48;
  return r;
}

AddRequest other_request(int i) {
  AddRequest r;
  // Some share the target's first 32 prompt tokens so that the prefix cache is in play.
  r.prompt = make_prompt(i % 2 ? 2024 : 500 + i, 32);
  auto tail = make_prompt(900 + i, 5 + (i * 37) % 90);
  r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
  r.sampling.temperature = 0.7f + 0.1f * static_cast<float>(i % 4);
  r.sampling.seed = 1000 + i;
  r.stop.max_tokens = 10 + (i * 13) % 60;
  return r;
}

struct RunResult {
  std::vector<int32_t> target_tokens;
  std::string target_text;
  EngineStats stats;
};

RunResult run_with(int concurrency, EngineConfig cfg) {
  FakeRunner runner;
  FakeTokenizer tok;
  auto engine = make_engine(runner, tok, cfg);
  // Half of the others start first; the target joins while they run, then the rest.
  const int first = (concurrency - 1) / 2;
  for (int i = 0; i < first; ++i) EXPECT_TRUE(engine->add(other_request(i)).ok());
  for (int i = 0; i < 3; ++i) engine->step();
  const SeqId target = *engine->add(target_request());
  for (int i = first; i < concurrency - 1; ++i) EXPECT_TRUE(engine->add(other_request(i)).ok());
  auto out = run_until_idle(*engine);
  RunResult r;
  r.target_tokens = out.at(target).tokens;
  r.target_text = out.at(target).text;
  r.stats = engine->stats();
  EXPECT_EQ(r.stats.kv_blocks_used, 0) << "blocks leaked";
  return r;
}

EngineConfig base_config() {
  EngineConfig cfg;
  cfg.num_blocks = 512;
  cfg.max_step_tokens = 512;
  return cfg;
}

TEST(BatchInvariance, IdenticalTokensAtConcurrency1248) {
  const RunResult alone = run_with(1, base_config());
  ASSERT_EQ(alone.target_tokens.size(), 48u);
  for (int c : {2, 4, 8}) {
    const RunResult r = run_with(c, base_config());
    EXPECT_EQ(r.target_tokens, alone.target_tokens) << "concurrency " << c;
    EXPECT_EQ(r.target_text, alone.target_text) << "concurrency " << c;
  }
}

TEST(BatchInvariance, ChunkedAndUnchunkedPrefillGiveIdenticalTokens) {
  const RunResult whole = run_with(4, base_config());
  for (int budget : {1, 7, 16, 33}) {
    EngineConfig cfg = base_config();
    cfg.max_step_tokens = budget;
    const RunResult r = run_with(4, cfg);
    EXPECT_EQ(r.target_tokens, whole.target_tokens) << "max_step_tokens " << budget;
  }
}

TEST(BatchInvariance, PrefixCacheOnOrOffGivesIdenticalTokens) {
  EngineConfig off = base_config();
  off.prefix_caching = false;
  const RunResult without = run_with(8, off);
  const RunResult with = run_with(8, base_config());
  EXPECT_GT(with.stats.prefix_hits, 0);
  EXPECT_EQ(with.target_tokens, without.target_tokens);
}

TEST(BatchInvariance, IdenticalTokensAfterPreemptions) {
  const RunResult alone = run_with(1, base_config());
  EngineConfig tight = base_config();
  tight.num_blocks = 14;  // 8 sequences of up to ~200 tokens in 224 slots: preemptions happen
  tight.max_step_tokens = 24;
  tight.max_preemptions = 1000;
  const RunResult r = run_with(8, tight);
  EXPECT_GT(r.stats.preemptions_total, 0) << "the pool was meant to be too small";
  EXPECT_EQ(r.stats.sequences_finished, 8);
  EXPECT_EQ(r.target_tokens, alone.target_tokens);
}

}  // namespace
}  // namespace cutline::engine
