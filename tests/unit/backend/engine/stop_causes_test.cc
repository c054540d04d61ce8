// Every finished sequence reports exactly one stop cause, with the text a client would see.
#include <gtest/gtest.h>

#include "engine_harness.h"

namespace cutline::engine {
namespace {

using testing::FakeRunner;
using testing::FakeTokenizer;
using testing::make_engine;
using testing::make_prompt;
using testing::Outcome;
using testing::run_until_idle;

AddRequest greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  AddRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.stop.max_tokens = max_tokens;
  return r;
}

Outcome run_one(FakeRunner& runner, AddRequest req, EngineConfig cfg = {}) {
  FakeTokenizer tok;
  if (cfg.num_blocks == 0) cfg.num_blocks = 256;
  auto engine = make_engine(runner, tok, cfg);
  auto id = engine->add(std::move(req));
  EXPECT_TRUE(id.ok());
  auto out = run_until_idle(*engine);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(engine->stats().sequences_finished, 1);
  return out.at(*id);
}

// The free-running greedy output of the fake model for this prompt.
Outcome reference(std::vector<int32_t> prompt, int64_t n) {
  FakeRunner runner;
  return run_one(runner, greedy(std::move(prompt), n));
}

TEST(StopCauses, EosEndsWithEosAndEmitsNoText) {
  FakeRunner runner;
  runner.set_eos(1, 100.0f);  // EOS dominates
  Outcome o = run_one(runner, greedy(make_prompt(1, 10), 50));
  EXPECT_EQ(o.record->cause, proto::Cause::kEos);
  EXPECT_EQ(o.tokens, std::vector<int32_t>{1});
  EXPECT_EQ(o.text, "");
  EXPECT_EQ(o.record->output_tokens, 1);
}

TEST(StopCauses, IgnoreEosKeepsGoingToMaxTokens) {
  FakeRunner runner;
  runner.set_eos(1, 100.0f);
  AddRequest r = greedy(make_prompt(1, 10), 5);
  r.stop.ignore_eos = true;
  Outcome o = run_one(runner, r);
  EXPECT_EQ(o.record->cause, proto::Cause::kClientMaxTokens);
  EXPECT_EQ(o.tokens.size(), 5u);
}

TEST(StopCauses, StopTokenIdEndsWithStopSequence) {
  const auto prompt = make_prompt(2, 12);
  Outcome ref = reference(prompt, 30);
  const int32_t stop_token = ref.tokens[6];
  size_t first = 0;
  while (ref.tokens[first] != stop_token) ++first;
  FakeRunner runner;
  AddRequest r = greedy(prompt, 30);
  r.stop.stop_token_ids = {stop_token};
  Outcome o = run_one(runner, r);
  EXPECT_EQ(o.record->cause, proto::Cause::kStopSequence);
  ASSERT_EQ(o.tokens.size(), first + 1);
  FakeTokenizer tok;
  EXPECT_EQ(o.text, tok.decode(std::span(ref.tokens).first(first)));  // stop token not emitted
}

TEST(StopCauses, StopStringAcrossTokensIsCutAndNotEmitted) {
  const auto prompt = make_prompt(3, 12);
  Outcome ref = reference(prompt, 40);
  FakeTokenizer tok;
  // A stop string made of the last byte of output token 9 and the first byte of token 10.
  std::string t9(tok.token_bytes(ref.tokens[9])), t10(tok.token_bytes(ref.tokens[10]));
  ASSERT_FALSE(t9.empty());
  ASSERT_FALSE(t10.empty());
  const std::string stop = t9.substr(t9.size() - 1) + t10.substr(0, 1);
  const size_t at = ref.text.find(stop);
  ASSERT_NE(at, std::string::npos);
  FakeRunner runner;
  AddRequest r = greedy(prompt, 40);
  r.stop.stop_strings = {stop};
  Outcome o = run_one(runner, r);
  EXPECT_EQ(o.record->cause, proto::Cause::kStopSequence);
  EXPECT_EQ(o.text, ref.text.substr(0, at));
  EXPECT_NE(o.record->message.find("stop string"), std::string::npos);
  EXPECT_LE(o.tokens.size(), 11u);
}

TEST(StopCauses, HeldBackTextIsReleasedWhenTheSequenceEndsOtherwise) {
  const auto prompt = make_prompt(4, 12);
  Outcome ref = reference(prompt, 6);
  FakeTokenizer tok;
  // A stop string that starts with the complete output but never completes.
  FakeRunner runner;
  AddRequest r = greedy(prompt, 6);
  r.stop.stop_strings = {ref.text + "\x01"};
  Outcome o = run_one(runner, r);
  EXPECT_EQ(o.record->cause, proto::Cause::kClientMaxTokens);
  EXPECT_EQ(o.text, ref.text);
}

TEST(StopCauses, ContextWindowEndsWithContextLength) {
  FakeRunner runner(64, /*context_length=*/40);
  AddRequest r = greedy(make_prompt(5, 30), 100);
  Outcome o = run_one(runner, r);
  EXPECT_EQ(o.record->cause, proto::Cause::kContextLength);
  EXPECT_EQ(o.record->output_tokens, 10);  // 30 + 10 = 40
}

TEST(StopCauses, MaxTokensWinsOverContextLengthWhenBothHit) {
  FakeRunner runner(64, 40);
  Outcome o = run_one(runner, greedy(make_prompt(5, 30), 10));
  EXPECT_EQ(o.record->cause, proto::Cause::kClientMaxTokens);
}

TEST(StopCauses, PromptLargerThanThePoolEndsWithBackendOom) {
  FakeRunner runner;
  EngineConfig cfg;
  cfg.num_blocks = 2;
  Outcome o = run_one(runner, greedy(make_prompt(6, 40), 5), cfg);
  EXPECT_EQ(o.record->cause, proto::Cause::kBackendOom);
  EXPECT_FALSE(o.record->message.empty());
  EXPECT_TRUE(o.tokens.empty());
}

TEST(StopCauses, PreemptedBeyondTheLimitEndsWithBackendPreempted) {
  FakeRunner runner;
  FakeTokenizer tok;
  EngineConfig cfg;
  cfg.num_blocks = 4;
  cfg.max_preemptions = 0;
  auto engine = make_engine(runner, tok, cfg);
  auto a = engine->add(greedy(make_prompt(7, 16), 100));
  auto b = engine->add(greedy(make_prompt(8, 16), 30));
  auto out = run_until_idle(*engine);
  EXPECT_EQ(out.at(*b).record->cause, proto::Cause::kBackendPreempted);
  EXPECT_EQ(out.at(*b).record->preemptions, 1);
  // a then has the pool to itself until it outgrows it: 64 slots.
  EXPECT_EQ(out.at(*a).record->cause, proto::Cause::kBackendOom);
  EXPECT_EQ(out.at(*a).record->output_tokens, 64 - 16 + 1);
  EXPECT_EQ(engine->stats().preemptions_total, 1);
}

}  // namespace
}  // namespace cutline::engine
