#pragma once
// Scheduler: decides what one engine step computes. Continuous batching with stall-free chunked
// prefill (Sarathi-style) and preemption by recompute:
//
//   1. Running sequences that decode (one token to feed) are scheduled first, oldest admission
//      first, one token each.
//   2. Running sequences still in prefill get the next chunk of their tokens, oldest first,
//      within what is left of the per-step token budget (max_step_tokens; optionally charging
//      each prefill token for the cached positions it attends to).
//   3. Waiting sequences are admitted, front of the queue first (preempted sequences are put
//      back at the front), while the budget and max_running allow and the free blocks can hold
//      all of the sequence's tokens (so that a new prompt does not evict itself halfway through
//      its prefill). Admission reuses cached prefix blocks (KVCacheManager::match_prefix) and
//      never preempts.
//
// When a running sequence needs a block and none is free, the most recently admitted running
// sequence is preempted: its blocks are freed, its tokens (prompt and output so far) are kept
// and it goes back to the front of the waiting queue, to be recomputed later. A sequence
// preempted more than max_preemptions times ends with backend_preempted; one that cannot fit
// even with the whole pool to itself ends with backend_oom.
//
// The scheduler changes the sequences' phases and the KV tables; the engine runs the model on
// the plan and then calls complete() for each chunk. Engine thread only.

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "cutline/engine/sequence.h"
#include "cutline/kv/kv_cache_manager.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::engine {

struct SchedulerConfig {
  int32_t max_step_tokens = 512;  // token budget of one forward step (decodes + prefill chunks)
  int32_t max_running = 256;      // sequences holding KV at once
  int32_t max_preemptions = 8;    // a sequence preempted more often ends with backend_preempted
  // Attention-aware prefill chunks (0: off). A prefill token at position p also attends to p
  // cached positions, so it is charged 1 + p / attention_positions_per_token budget tokens: a
  // chunk late in a long prompt is smaller than one at its start and every step costs about
  // the same. Decodes are charged 1 token each (they are never held back). A prefilling
  // sequence that gets a turn always advances by at least one token.
  int32_t attention_positions_per_token = 0;
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int32_t start_pos = 0;  // == seq->num_computed when planned
  int32_t n_tokens = 0;
  bool want_logits = false;  // the chunk reaches the sequence's last token: sample after it
};

// A sequence the scheduler ended (it is no longer queued or running and holds no blocks).
struct EndedSequence {
  Sequence* seq = nullptr;
  proto::Cause cause = proto::Cause::kBackendOom;
  std::string message;
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // decodes first, then prefill chunks
  std::vector<Sequence*> preempted;    // preempted in this step and requeued
  std::vector<EndedSequence> ended;    // ended by the scheduler in this step
  int32_t num_tokens = 0;
  int32_t decode_tokens = 0;
  int32_t prefill_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, kv::KVCacheManager& kv);

  // Queues a new sequence at the back of the waiting queue.
  void add(Sequence* seq);
  // Removes a sequence wherever it is (abort or finish) and frees its blocks in this call.
  void remove(Sequence* seq);

  StepPlan schedule();
  // After the forward step: the chunk's tokens now have K/V (advances num_computed and
  // registers full blocks in the prefix cache).
  void complete(const ScheduledChunk& chunk);

  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int64_t preemptions_total() const { return preemptions_total_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }  // admission order
  const SchedulerConfig& config() const { return config_; }

 private:
  bool schedule_running(Sequence* seq, int32_t n_tokens, bool decode, StepPlan& plan);
  void preempt(Sequence* victim, StepPlan& plan);
  void end(Sequence* seq, proto::Cause cause, std::string message, StepPlan& plan);
  void update_peak(Sequence* seq);
  // Budget tokens that computing positions [start, start + n) costs (see SchedulerConfig).
  int64_t chunk_cost(int64_t start, int64_t n) const;
  // The largest chunk from `start`, at most max_n tokens and at least 1, that fits budget_.
  int32_t fit_chunk(int64_t start, int64_t max_n) const;
  void erase_running(Sequence* seq);

  int32_t budget_ = 0;  // tokens left in the step being planned
  SchedulerConfig config_;
  kv::KVCacheManager& kv_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // sorted by admit_order
  int64_t next_admit_order_ = 0;
  int64_t preemptions_total_ = 0;
};

}  // namespace cutline::engine
