#include "cutline/engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

namespace cutline::engine {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  void init(int32_t blocks, int32_t block_size, SchedulerConfig cfg) {
    kv_ = std::make_unique<kv::KVCacheManager>(blocks, block_size, kv::model_salt("t"),
                                               /*prefix_caching=*/false);
    sched_ = std::make_unique<Scheduler>(cfg, *kv_);
  }
  Sequence* add(int32_t prompt_len) {
    auto s = std::make_unique<Sequence>();
    s->id = static_cast<SeqId>(seqs_.size() + 1);
    s->tokens.resize(prompt_len);
    std::iota(s->tokens.begin(), s->tokens.end(), 10 * s->id);
    s->prompt_len = prompt_len;
    seqs_.push_back(std::move(s));
    sched_->add(seqs_.back().get());
    return seqs_.back().get();
  }
  // Applies a plan as the engine would: K/V written, one token sampled where logits were wanted.
  void run(const StepPlan& plan) {
    for (const auto& c : plan.chunks) {
      sched_->complete(c);
      if (c.want_logits) c.seq->tokens.push_back(7);
    }
  }
  static int32_t tokens_of(const StepPlan& plan, const Sequence* s) {
    for (const auto& c : plan.chunks)
      if (c.seq == s) return c.n_tokens;
    return 0;
  }

  std::unique_ptr<kv::KVCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
};

TEST_F(SchedulerTest, DecodesFirstThenPrefillChunkWithinBudget) {
  init(64, 4,
       {.max_step_tokens = 16,
        .max_running = 8,
        .max_preemptions = 4,
        .attention_positions_per_token = 0});
  Sequence* a = add(5);
  Sequence* b = add(6);
  Sequence* c = add(3);
  run(sched_->schedule());  // prefills a, b, c (14 tokens)
  Sequence* big = add(100);
  for (int step = 0; step < 3; ++step) {
    StepPlan plan = sched_->schedule();
    ASSERT_EQ(plan.chunks.size(), 4u);
    EXPECT_EQ(plan.chunks[0].seq, a);
    EXPECT_EQ(plan.chunks[1].seq, b);
    EXPECT_EQ(plan.chunks[2].seq, c);
    EXPECT_EQ(plan.chunks[3].seq, big);
    EXPECT_EQ(plan.decode_tokens, 3);
    EXPECT_EQ(plan.prefill_tokens, 13);
    EXPECT_EQ(plan.num_tokens, 16);
    EXPECT_FALSE(plan.chunks[3].want_logits);
    run(plan);
  }
  EXPECT_EQ(big->num_computed, 39);
}

// With attention-aware chunks a prefill token at position p costs 1 + p / 64 budget tokens:
// with a decode taking 1 of 64, the first chunk of a 1,000-token prompt is 46 tokens (46 +
// ceil(1081 / 64) = 63; 47 would cost 65), near position 1,000 at most 4, chunks shrink as the
// prompt advances, every chunk is the largest that fits, a running decode still gets its token each
// step, and the prompt completes.
TEST_F(SchedulerTest, AttentionAwareChunksShrinkWithPositionAndFitTheBudget) {
  init(256, 16,
       {.max_step_tokens = 64,
        .max_running = 8,
        .max_preemptions = 4,
        .attention_positions_per_token = 64});
  Sequence* d = add(3);
  run(sched_->schedule());  // d is decoding from now on
  Sequence* s = add(1000);
  auto cost = [](int64_t start, int64_t n) { return n + (n * start + n * (n + 1) / 2 + 63) / 64; };
  int32_t prev = 1 << 30;
  int steps = 0;
  while (s->num_output() == 0) {
    const int64_t start = s->num_computed;
    StepPlan plan = sched_->schedule();
    ASSERT_EQ(tokens_of(plan, d), 1);
    const int32_t n = tokens_of(plan, s);
    ASSERT_GE(n, 1);
    if (steps == 0) {
      EXPECT_EQ(n, 46);  // 63 budget tokens are left after the decode
    }
    if (start >= 900) {
      EXPECT_LE(n, 4) << "at " << start;
    }
    EXPECT_LE(n, prev) << "at " << start;
    if (n > 1) {
      EXPECT_LE(cost(start, n), 63) << "at " << start;
    }
    if (start + n < 1000) {
      EXPECT_GT(cost(start, n + 1), 63) << "at " << start;
    }
    prev = n;
    run(plan);
    ASSERT_LT(++steps, 1000);
  }
}

TEST_F(SchedulerTest, BudgetIsNeverExceededAndPromptEventuallyCompletes) {
  init(256, 16,
       {.max_step_tokens = 7,
        .max_running = 8,
        .max_preemptions = 4,
        .attention_positions_per_token = 0});
  Sequence* s = add(50);
  int steps = 0;
  while (s->num_output() == 0) {
    StepPlan plan = sched_->schedule();
    ASSERT_LE(plan.num_tokens, 7);
    run(plan);
    ASSERT_LT(++steps, 100);
  }
  EXPECT_EQ(steps, 8);  // ceil(50 / 7)
}

TEST_F(SchedulerTest, AdmissionWaitsUntilAllPromptBlocksAreFree) {
  init(6, 4,
       {.max_step_tokens = 64,
        .max_running = 8,
        .max_preemptions = 4,
        .attention_positions_per_token = 0});
  Sequence* a = add(16);  // 4 blocks
  run(sched_->schedule());
  Sequence* b = add(12);  // needs 3, only 2 free
  StepPlan plan = sched_->schedule();
  EXPECT_EQ(tokens_of(plan, b), 0);
  EXPECT_EQ(b->phase, SeqPhase::kWaiting);
  sched_->remove(a);
  plan = sched_->schedule();
  EXPECT_EQ(tokens_of(plan, b), 12);
}

TEST_F(SchedulerTest, MaxRunningLimitsAdmission) {
  init(64, 4,
       {.max_step_tokens = 64,
        .max_running = 2,
        .max_preemptions = 4,
        .attention_positions_per_token = 0});
  add(3);
  add(3);
  Sequence* c = add(3);
  StepPlan plan = sched_->schedule();
  EXPECT_EQ(plan.chunks.size(), 2u);
  EXPECT_EQ(tokens_of(plan, c), 0);
  EXPECT_EQ(sched_->num_waiting(), 1);
}

TEST_F(SchedulerTest, PreemptsNewestFirstKeepsTokensAndRequeuesAtFront) {
  // 3 sequences of 4 prompt tokens in a pool of 4 blocks of 4 tokens.
  init(4, 4,
       {.max_step_tokens = 64,
        .max_running = 8,
        .max_preemptions = 4,
        .attention_positions_per_token = 0});
  Sequence* a = add(4);
  Sequence* b = add(4);
  Sequence* c = add(4);
  Sequence* d = add(4);
  run(sched_->schedule());  // all four admitted: 4 blocks used, each has 1 output token
  ASSERT_EQ(sched_->num_running(), 4);
  // Each now needs a second block to decode: a takes the room of d (newest), b of c.
  StepPlan plan = sched_->schedule();
  ASSERT_EQ(plan.preempted.size(), 2u);
  EXPECT_EQ(plan.preempted[0], d);
  EXPECT_EQ(plan.preempted[1], c);
  EXPECT_EQ(tokens_of(plan, a), 1);
  EXPECT_EQ(tokens_of(plan, b), 1);
  EXPECT_EQ(tokens_of(plan, c), 0);
  // Requeued at the front in admission order, outputs kept, K/V gone.
  ASSERT_EQ(sched_->waiting().size(), 2u);
  EXPECT_EQ(sched_->waiting()[0], c);
  EXPECT_EQ(sched_->waiting()[1], d);
  EXPECT_EQ(c->num_output(), 1);
  EXPECT_EQ(c->num_computed, 0);
  EXPECT_EQ(c->preemptions, 1);
  EXPECT_EQ(kv_->num_blocks_of(c->id), 0);
  EXPECT_EQ(sched_->preemptions_total(), 2);
  run(plan);
  // When a finishes, c is readmitted first and recomputes prompt + output (5 tokens).
  sched_->remove(a);
  plan = sched_->schedule();
  EXPECT_EQ(tokens_of(plan, c), 5);
  EXPECT_EQ(tokens_of(plan, d), 0);
}

TEST_F(SchedulerTest, PreemptedTooOftenEndsWithBackendPreempted) {
  init(2, 4,
       {.max_step_tokens = 64,
        .max_running = 8,
        .max_preemptions = 0,
        .attention_positions_per_token = 0});
  Sequence* a = add(4);
  Sequence* b = add(4);
  run(sched_->schedule());
  StepPlan plan = sched_->schedule();
  ASSERT_EQ(plan.ended.size(), 1u);
  EXPECT_EQ(plan.ended[0].seq, b);
  EXPECT_EQ(plan.ended[0].cause, proto::Cause::kBackendPreempted);
  EXPECT_NE(plan.ended[0].message.find("preempted 1 times (limit 0)"), std::string::npos);
  EXPECT_EQ(tokens_of(plan, a), 1);
  EXPECT_EQ(sched_->num_waiting(), 0);
}

TEST_F(SchedulerTest, PromptThatCanNeverFitEndsWithBackendOom) {
  init(4, 4,
       {.max_step_tokens = 64,
        .max_running = 8,
        .max_preemptions = 4,
        .attention_positions_per_token = 0});
  Sequence* big = add(17);  // 5 blocks > 4
  Sequence* ok = add(4);
  StepPlan plan = sched_->schedule();
  ASSERT_EQ(plan.ended.size(), 1u);
  EXPECT_EQ(plan.ended[0].seq, big);
  EXPECT_EQ(plan.ended[0].cause, proto::Cause::kBackendOom);
  EXPECT_FALSE(plan.ended[0].message.empty());
  EXPECT_EQ(tokens_of(plan, ok), 4);
}

TEST_F(SchedulerTest, SequenceOutgrowingTheWholePoolEndsWithBackendOom) {
  init(2, 4,
       {.max_step_tokens = 64,
        .max_running = 8,
        .max_preemptions = 4,
        .attention_positions_per_token = 0});
  Sequence* a = add(7);
  run(sched_->schedule());  // 8 tokens: both blocks
  StepPlan plan = sched_->schedule();
  EXPECT_EQ(tokens_of(plan, a), 1);  // position 7 still fits
  run(plan);
  plan = sched_->schedule();  // position 8 needs a third block
  ASSERT_EQ(plan.ended.size(), 1u);
  EXPECT_EQ(plan.ended[0].cause, proto::Cause::kBackendOom);
  EXPECT_EQ(kv_->num_free_blocks(), 2);
}

TEST_F(SchedulerTest, RemoveFreesBlocksImmediately) {
  init(8, 4,
       {.max_step_tokens = 64,
        .max_running = 8,
        .max_preemptions = 4,
        .attention_positions_per_token = 0});
  Sequence* a = add(10);
  run(sched_->schedule());
  EXPECT_EQ(kv_->num_free_blocks(), 5);
  sched_->remove(a);
  EXPECT_EQ(kv_->num_free_blocks(), 8);
  EXPECT_EQ(sched_->num_running(), 0);
}

}  // namespace
}  // namespace cutline::engine
