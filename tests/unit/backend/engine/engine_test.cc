#include "cutline/engine/engine.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "cutline/base/clock.h"
#include "engine_harness.h"

namespace cutline::engine {
namespace {

using testing::FakeRunner;
using testing::FakeTokenizer;
using testing::make_engine;
using testing::make_prompt;
using testing::run_until_idle;

AddRequest request(std::vector<int32_t> prompt, int64_t max_tokens, uint64_t seed = 7) {
  AddRequest r;
  r.prompt = std::move(prompt);
  r.stop.max_tokens = max_tokens;
  r.sampling.seed = seed;
  return r;
}

TEST(Engine, SizesPoolFromMemoryBudgetAndAllocatesRunnerKv) {
  FakeRunner runner(64, 4096, /*kv_bytes_per_token=*/100);
  FakeTokenizer tok;
  EngineConfig cfg;
  cfg.kv_memory_bytes = 100 * 16 * 10 + 99;  // 10 blocks and a bit
  auto engine = make_engine(runner, tok, cfg);
  EXPECT_EQ(engine->num_blocks(), 10);
  EXPECT_EQ(runner.n_blocks(), 10);
  EXPECT_EQ(engine->stats().kv_blocks_free, 10);

  cfg.kv_memory_bytes = int64_t{1} << 40;  // capped at max_running full context windows
  cfg.max_running = 3;
  EXPECT_EQ(make_engine(runner, tok, cfg)->num_blocks(), 3 * 4096 / 16);

  cfg.kv_memory_bytes = 100;  // not even one block
  auto none = Engine::create(runner, tok, cfg);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind, ErrorKind::kExhausted);
}

TEST(Engine, RejectsInvalidRequests) {
  FakeRunner runner(64, 128);
  FakeTokenizer tok;
  auto engine = make_engine(runner, tok, {});
  EXPECT_EQ(engine->add(request({}, 4)).error().kind, ErrorKind::kBadRequest);
  EXPECT_EQ(engine->add(request({2, 64}, 4)).error().kind, ErrorKind::kBadRequest);
  EXPECT_EQ(engine->add(request(make_prompt(1, 128), 4)).error().kind, ErrorKind::kBadRequest);
  AddRequest bad = request({2, 3}, 4);
  bad.sampling.top_p = 0;
  EXPECT_EQ(engine->add(bad).error().kind, ErrorKind::kBadRequest);
  EXPECT_EQ(engine->add(request({2, 3}, 0)).error().kind, ErrorKind::kBadRequest);
  EXPECT_TRUE(engine->idle());
}

TEST(Engine, GeneratesMaxTokensAndReportsRecord) {
  FakeRunner runner;
  FakeTokenizer tok;
  base::ManualClock clock;
  runner.on_forward([&](const model::ForwardBatch&) { clock.advance_us(2000); });
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.clock = &clock;
  auto engine = make_engine(runner, tok, cfg);
  auto id = engine->add(request(make_prompt(3, 40), 12));
  ASSERT_TRUE(id.ok());
  auto out = run_until_idle(*engine);
  const auto& o = out.at(*id);
  ASSERT_TRUE(o.record);
  EXPECT_EQ(o.tokens.size(), 12u);
  EXPECT_EQ(o.record->cause, proto::Cause::kClientMaxTokens);
  EXPECT_EQ(o.record->input_tokens, 40);
  EXPECT_EQ(o.record->output_tokens, 12);
  EXPECT_EQ(o.text, tok.decode(o.tokens));
  // One step of 2 ms for the whole prompt (prefill; it also yields the first token's logits),
  // sampling takes no time on the manual clock, then 11 decode steps.
  EXPECT_DOUBLE_EQ(o.record->ttft_ms, 2.0);
  EXPECT_DOUBLE_EQ(o.record->prefill_ms, 2.0);
  EXPECT_DOUBLE_EQ(o.record->first_decode_ms, 0.0);
  EXPECT_DOUBLE_EQ(o.record->queue_ms, 0.0);
  EXPECT_DOUBLE_EQ(o.record->queue_ms + o.record->prefill_ms + o.record->first_decode_ms,
                   o.record->ttft_ms);
  EXPECT_DOUBLE_EQ(o.record->decode_ms, 22.0);
  EXPECT_DOUBLE_EQ(o.record->itl_mean_ms, 2.0);
  EXPECT_EQ(o.record->kv_blocks_peak, 4);  // 40 + 11 computed tokens -> 4 blocks of 16
  EXPECT_EQ(o.record->kv_bytes_peak, 4 * 16 * 64);
  EXPECT_EQ(o.record->device_free_bytes, 1'000'000);
  EXPECT_EQ(o.record->seed, 7u);
  EXPECT_FALSE(o.record->seed_generated);
  EngineStats s = engine->stats();
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.sequences_finished, 1);
  EXPECT_EQ(s.finished_by_cause[static_cast<int>(proto::Cause::kClientMaxTokens)], 1);
  EXPECT_EQ(s.output_tokens_total, 12);
}

TEST(Engine, PrefillPhasesAddUpWhenChunked) {
  FakeRunner runner;
  FakeTokenizer tok;
  base::ManualClock clock;
  runner.on_forward([&](const model::ForwardBatch&) { clock.advance_us(1000); });
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.clock = &clock;
  cfg.max_step_tokens = 16;
  auto engine = make_engine(runner, tok, cfg);
  auto id = engine->add(request(make_prompt(3, 50), 3));
  clock.advance_us(5000);  // waits 5 ms before the first step
  auto out = run_until_idle(*engine);
  const auto& rec = *out.at(*id).record;
  // 50 tokens in chunks of 16: 4 prefill steps (16, 16, 16, 2), the last one yielding the
  // logits token 1 is sampled from (instantly on the manual clock).
  EXPECT_DOUBLE_EQ(rec.prefill_ms, 4.0);
  EXPECT_DOUBLE_EQ(rec.first_decode_ms, 0.0);
  EXPECT_DOUBLE_EQ(rec.queue_ms, 5.0);
  EXPECT_DOUBLE_EQ(rec.ttft_ms, 9.0);
}

TEST(Engine, UnseededRequestsDrawFromInjectedSourceAndReportIt) {
  FakeRunner runner;
  FakeTokenizer tok;
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.seed_source = [] { return uint64_t{99}; };
  auto engine = make_engine(runner, tok, cfg);
  AddRequest r = request(make_prompt(5, 10), 8);
  r.sampling.seed.reset();
  auto a = engine->add(r);
  auto b = engine->add(request(make_prompt(5, 10), 8, 99));
  auto out = run_until_idle(*engine);
  EXPECT_TRUE(out.at(*a).record->seed_generated);
  EXPECT_EQ(out.at(*a).record->seed, 99u);
  EXPECT_EQ(out.at(*a).tokens, out.at(*b).tokens);  // replayable with the reported seed
}

TEST(Engine, AbortFreesBlocksBeforeNextStepAndReportsClientCancel) {
  FakeRunner runner;
  FakeTokenizer tok;
  EngineConfig cfg;
  cfg.num_blocks = 64;
  auto engine = make_engine(runner, tok, cfg);
  auto id = engine->add(request(make_prompt(1, 30), 1000));
  auto other = engine->add(request(make_prompt(2, 30), 5));
  engine->step();
  engine->step();
  EXPECT_GT(engine->stats().kv_blocks_used, 0);
  const size_t steps_before = runner.steps().size();
  engine->abort(*id);
  engine->step();
  // The aborted sequence is not in the step that follows the abort.
  for (const auto& e : runner.steps()[steps_before].entries) EXPECT_NE(e.seq_id, *id);
  auto out = run_until_idle(*engine);
  std::vector<EngineEvent> rest;
  ASSERT_TRUE(out.count(*other));
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
  EXPECT_EQ(engine->stats().finished_by_cause[static_cast<int>(proto::Cause::kClientCancel)], 1);
  engine->abort(*id);  // twice: ignored
  engine->abort(12345);
  engine->step();
  EXPECT_TRUE(engine->idle());
}

TEST(Engine, AbortOfWaitingSequenceReportsCancelWithQueueTime) {
  FakeRunner runner;
  FakeTokenizer tok;
  base::ManualClock clock;
  EngineConfig cfg;
  cfg.num_blocks = 64;
  cfg.clock = &clock;
  auto engine = make_engine(runner, tok, cfg);
  auto id = engine->add(request(make_prompt(1, 30), 10));
  clock.advance_us(3000);
  engine->abort(*id);
  auto out = run_until_idle(*engine);
  const auto& o = out.at(*id);
  ASSERT_TRUE(o.record);
  EXPECT_EQ(o.record->cause, proto::Cause::kClientCancel);
  EXPECT_EQ(o.record->output_tokens, 0);
  EXPECT_DOUBLE_EQ(o.record->queue_ms, 3.0);
  EXPECT_TRUE(runner.steps().empty());
}

TEST(Engine, RunnerFailureEndsTheBatchWithAnError) {
  FakeRunner runner;
  FakeTokenizer tok;
  EngineConfig cfg;
  cfg.num_blocks = 64;
  auto engine = make_engine(runner, tok, cfg);
  auto id = engine->add(request(make_prompt(1, 10), 10));
  runner.fail_next();
  auto out = run_until_idle(*engine);
  const auto& rec = *out.at(*id).record;
  EXPECT_TRUE(rec.runner_error);
  EXPECT_EQ(rec.cause, proto::Cause::kUpstreamError);
  EXPECT_NE(rec.message.find("injected failure"), std::string::npos);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);
}

TEST(Engine, ThreadedModeWakesTheServerAndDeliversAllEvents) {
  FakeRunner runner;
  FakeTokenizer tok;
  EngineConfig cfg;
  cfg.num_blocks = 256;
  auto engine = make_engine(runner, tok, cfg);
  std::mutex mu;
  std::condition_variable cv;
  int wakes = 0;
  engine->set_wake_callback([&] {
    std::lock_guard<std::mutex> lock(mu);
    ++wakes;
    cv.notify_all();
  });
  engine->start();
  std::vector<SeqId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(*engine->add(request(make_prompt(i, 20), 15, i)));
  std::map<SeqId, int> tokens;
  int finished = 0;
  std::vector<EngineEvent> events;
  std::unique_lock<std::mutex> lock(mu);
  while (finished < 4) {
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return wakes > 0; }))
        << "no wake-up";
    wakes = 0;
    lock.unlock();
    events.clear();
    engine->drain_events(events);
    for (auto& e : events) {
      tokens[e.seq_id] += static_cast<int>(e.tokens.size());
      if (e.finished) ++finished;
    }
    lock.lock();
  }
  lock.unlock();
  engine->stop();
  for (SeqId id : ids) EXPECT_EQ(tokens[id], 15);
  EXPECT_TRUE(engine->idle());
}

TEST(Engine, PrefixCacheReusesFullPromptBlocksWithIdenticalOutput) {
  FakeRunner runner;
  FakeTokenizer tok;
  EngineConfig cfg;
  cfg.num_blocks = 64;
  auto engine = make_engine(runner, tok, cfg);
  auto prompt = make_prompt(11, 70);
  auto a = engine->add(request(prompt, 10));
  auto first = run_until_idle(*engine);
  auto b = engine->add(request(prompt, 10));
  auto second = run_until_idle(*engine);
  EXPECT_EQ(first.at(*a).tokens, second.at(*b).tokens);
  EXPECT_EQ(second.at(*b).record->cached_prompt_tokens, 64);  // 4 full blocks of 16
  EngineStats s = engine->stats();
  EXPECT_EQ(s.prefix_hits, 1);
  EXPECT_EQ(s.prefix_hit_tokens, 64);
  // The second run computed only the last 6 prompt tokens in its first step.
  bool found = false;
  for (const auto& step : runner.steps())
    for (const auto& e : step.entries)
      if (e.seq_id == *b && e.start_pos == 64 && e.n_tokens == 6) found = true;
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace cutline::engine

namespace cutline::engine {
namespace {

TEST(Engine, TooSmallPoolCompletesEverySequenceAndCountsEveryPreemption) {
  FakeRunner runner;
  FakeTokenizer tok;
  EngineConfig cfg;
  cfg.num_blocks = 12;  // 192 slots for 8 sequences that grow to 60-100 tokens each
  cfg.max_step_tokens = 32;
  cfg.max_preemptions = 1000;
  auto engine = make_engine(runner, tok, cfg);
  std::vector<SeqId> ids;
  for (int i = 0; i < 8; ++i) {
    AddRequest r;
    r.prompt = make_prompt(100 + i, 20 + 5 * i);
    r.sampling.seed = i;
    r.stop.max_tokens = 40 + 5 * i;
    ids.push_back(*engine->add(r));
  }
  auto out = run_until_idle(*engine);
  int64_t preemptions = 0;
  for (int i = 0; i < 8; ++i) {
    const auto& o = out.at(ids[i]);
    ASSERT_TRUE(o.record);
    EXPECT_EQ(o.record->cause, proto::Cause::kClientMaxTokens);
    EXPECT_EQ(static_cast<int64_t>(o.tokens.size()), 40 + 5 * i);
    preemptions += o.record->preemptions;
  }
  EngineStats s = engine->stats();
  EXPECT_GT(s.preemptions_total, 0);
  EXPECT_EQ(preemptions, s.preemptions_total);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.queue_depth, 0);
}

}  // namespace
}  // namespace cutline::engine
