#include "cutline/engine/scheduler.h"

#include <algorithm>
#include <cassert>

namespace cutline::engine {

Scheduler::Scheduler(SchedulerConfig config, kv::KVCacheManager& kv) : config_(config), kv_(kv) {}

void Scheduler::add(Sequence* seq) {
  seq->phase = SeqPhase::kWaiting;
  seq->num_computed = 0;
  waiting_.push_back(seq);
}

void Scheduler::erase_running(Sequence* seq) {
  auto it = std::find(running_.begin(), running_.end(), seq);
  if (it != running_.end()) running_.erase(it);
}

void Scheduler::remove(Sequence* seq) {
  erase_running(seq);
  auto it = std::find(waiting_.begin(), waiting_.end(), seq);
  if (it != waiting_.end()) waiting_.erase(it);
  kv_.free(seq->id);
  seq->num_computed = 0;
}

void Scheduler::update_peak(Sequence* seq) {
  seq->kv_blocks_peak = std::max(seq->kv_blocks_peak, kv_.num_blocks_of(seq->id));
}

void Scheduler::end(Sequence* seq, proto::Cause cause, std::string message, StepPlan& plan) {
  remove(seq);
  plan.ended.push_back(EndedSequence{seq, cause, std::move(message)});
}

void Scheduler::preempt(Sequence* victim, StepPlan& plan) {
  // A victim planned earlier in this step gives its tokens back to the budget.
  for (auto it = plan.chunks.begin(); it != plan.chunks.end(); ++it) {
    if (it->seq != victim) continue;
    const bool decode = it->n_tokens == 1 && victim->is_decoding();
    budget_ = static_cast<int32_t>(std::min<int64_t>(
        config_.max_step_tokens, budget_ + (decode ? 1 : chunk_cost(it->start_pos, it->n_tokens))));
    plan.num_tokens -= it->n_tokens;
    if (decode)
      --plan.decode_tokens;
    else
      plan.prefill_tokens -= it->n_tokens;
    plan.chunks.erase(it);
    break;
  }
  erase_running(victim);
  kv_.free(victim->id);
  victim->num_computed = 0;
  ++victim->preemptions;
  ++preemptions_total_;
  if (victim->preemptions > config_.max_preemptions) {
    plan.ended.push_back(
        EndedSequence{victim, proto::Cause::kBackendPreempted,
                      "preempted " + std::to_string(victim->preemptions) + " times (limit " +
                          std::to_string(config_.max_preemptions) + ") because KV blocks ran out"});
    return;
  }
  victim->phase = SeqPhase::kWaiting;
  waiting_.push_front(victim);
  plan.preempted.push_back(victim);
}

bool Scheduler::schedule_running(Sequence* seq, int32_t n_tokens, bool decode, StepPlan& plan) {
  while (true) {
    if (kv_.allocate(seq->id, seq->num_computed + n_tokens)) {
      const int32_t start = static_cast<int32_t>(seq->num_computed);
      plan.chunks.push_back(
          ScheduledChunk{seq, start, n_tokens, start + n_tokens == seq->num_tokens()});
      plan.num_tokens += n_tokens;
      if (decode)
        plan.decode_tokens += n_tokens;
      else
        plan.prefill_tokens += n_tokens;
      update_peak(seq);
      return true;
    }
    assert(!running_.empty());
    Sequence* victim = running_.back();
    if (victim == seq) {
      if (running_.size() == 1) {
        end(seq, proto::Cause::kBackendOom,
            "sequence of " + std::to_string(seq->num_tokens()) + " tokens needs more than the " +
                std::to_string(kv_.num_blocks()) + " KV blocks of " +
                std::to_string(kv_.block_size()) + " tokens in the pool",
            plan);
      } else {
        preempt(seq, plan);
      }
      return false;
    }
    preempt(victim, plan);
  }
}

int64_t Scheduler::chunk_cost(int64_t start, int64_t n) const {
  const int64_t per = config_.attention_positions_per_token;
  if (per <= 0) return n;
  // Token start + i attends to start + i + 1 positions.
  const int64_t positions = n * start + n * (n + 1) / 2;
  return n + (positions + per - 1) / per;
}

int32_t Scheduler::fit_chunk(int64_t start, int64_t max_n) const {
  int64_t n = std::min<int64_t>(max_n, budget_);
  if (config_.attention_positions_per_token > 0) {
    int64_t lo = 1, hi = n;  // the largest n in [1, hi] with chunk_cost <= budget_ (or 1)
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (chunk_cost(start, mid) <= budget_)
        lo = mid;
      else
        hi = mid - 1;
    }
    n = lo;
  }
  return static_cast<int32_t>(std::max<int64_t>(1, n));
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  budget_ = config_.max_step_tokens;

  // 1. Decodes, oldest admission first. A preemption removes the newest running sequence, which
  // is never before index i, so the loop stays valid.
  for (size_t i = 0; i < running_.size() && budget_ > 0; ++i) {
    Sequence* seq = running_[i];
    if (!seq->is_decoding()) continue;
    if (schedule_running(seq, 1, /*decode=*/true, plan)) budget_ -= 1;
  }
  // 2. Prefill chunks of running sequences.
  for (size_t i = 0; i < running_.size() && budget_ > 0; ++i) {
    Sequence* seq = running_[i];
    if (seq->is_decoding()) continue;
    const int32_t n = fit_chunk(seq->num_computed, seq->num_uncomputed());
    const int64_t cost = chunk_cost(seq->num_computed, n);
    if (schedule_running(seq, n, /*decode=*/false, plan))
      budget_ -= static_cast<int32_t>(std::min<int64_t>(cost, budget_));
  }
  // 3. Admission.
  while (!waiting_.empty() && budget_ > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_running) {
    Sequence* seq = waiting_.front();
    const int32_t need_total = kv_.blocks_for_tokens(seq->num_tokens());
    if (need_total > kv_.num_blocks()) {
      end(seq, proto::Cause::kBackendOom,
          "sequence of " + std::to_string(seq->num_tokens()) + " tokens needs " +
              std::to_string(need_total) + " KV blocks; the pool has " +
              std::to_string(kv_.num_blocks()),
          plan);
      continue;
    }
    const int32_t cached = kv_.match_prefix(seq->id, seq->tokens);
    const int32_t cached_blocks = kv_.num_blocks_of(seq->id);
    const int32_t n = fit_chunk(cached, seq->num_tokens() - cached);
    if (need_total - cached_blocks > kv_.num_free_blocks() || !kv_.allocate(seq->id, cached + n)) {
      kv_.cancel_match(seq->id);
      break;
    }
    waiting_.pop_front();
    seq->phase = SeqPhase::kRunning;
    seq->admit_order = next_admit_order_++;
    seq->num_computed = cached;
    const bool decode = n == 1 && seq->is_decoding();
    if (seq->preemptions == 0 && seq->num_output() == 0) seq->cached_prompt_tokens = cached;
    running_.push_back(seq);
    plan.chunks.push_back(ScheduledChunk{seq, cached, n, cached + n == seq->num_tokens()});
    plan.num_tokens += n;
    if (decode)
      plan.decode_tokens += n;
    else
      plan.prefill_tokens += n;
    update_peak(seq);
    budget_ -= static_cast<int32_t>(std::min<int64_t>(chunk_cost(cached, n), budget_));
  }
  return plan;
}

void Scheduler::complete(const ScheduledChunk& chunk) {
  Sequence* seq = chunk.seq;
  seq->num_computed = chunk.start_pos + chunk.n_tokens;
  kv_.commit(seq->id, seq->tokens, seq->num_computed);
}

}  // namespace cutline::engine
