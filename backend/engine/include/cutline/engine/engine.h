#pragma once
// Engine: the backend's serving loop for one loaded model. One engine thread owns every
// sequence, the scheduler and the KV cache manager; other threads talk to it only through the
// thread-safe methods below.
//
// Thread rules
//   * add(), abort(), drain_events(), stats(), idle() may be called from any thread at any time.
//     add() and abort() only enqueue a command; the engine thread applies them before its next
//     step (an abort frees the sequence's KV blocks in that same step, before scheduling, and
//     the sequence gets a finished event with cause client_cancel).
//   * Events are appended to an internal queue on the engine thread. After each step that
//     produced events, the engine thread calls the wake callback (set_wake_callback) once, with
//     no engine lock held. The callback must be cheap and must not block: the libevent server
//     turns it into `event_active(ev, EV_READ, 0)` on an event created with evthread
//     (pthreads) support, and its handler on the server loop calls drain_events(). The callback
//     may call add()/abort()/drain_events() (no lock is held) but should not.
//   * start() spawns the engine thread; stop() (and the destructor) ends it after the current
//     step. Without start(), tests and benchmarks drive the engine with step() on their own
//     thread — same code path, no thread, fully deterministic with a ManualClock.
//   * ModelRunner and Tokenizer must outlive the Engine; the engine calls the runner only from
//     the engine thread (or the step() caller).
//
// Batch invariance: with a runner that honours the ModelRunner contract, a sequence's tokens
// depend only on (prompt, SamplingParams, seed, StopConditions) — never on other sequences,
// chunking, preemption or the prefix cache — because its sampler draws from a counter-based
// stream indexed by its own output position (sampler.h, counter_rng.h).

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/base/result.h"
#include "cutline/engine/engine_event.h"
#include "cutline/engine/engine_stats.h"
#include "cutline/engine/sampler.h"
#include "cutline/engine/sampling_params.h"
#include "cutline/engine/scheduler.h"
#include "cutline/engine/sequence.h"
#include "cutline/engine/stop_conditions.h"
#include "cutline/engine/token_logprobs.h"
#include "cutline/kv/kv_cache_manager.h"
#include "cutline/model/model_runner.h"
#include "cutline/model/tokenizer.h"

namespace cutline::engine {

struct EngineConfig {
  int32_t block_size = 16;  // tokens per KV block
  // KV memory budget. num_blocks > 0 wins (tests); else kv_memory_bytes > 0 (--kv-memory);
  // else kv_memory_fraction of ModelRunner::device_free_bytes() at create(). A budget is capped
  // at max_running full context windows (more blocks could never be used).
  int32_t num_blocks = 0;
  int64_t kv_memory_bytes = 0;
  double kv_memory_fraction = 0.5;
  int32_t max_step_tokens = 512;  // --max-step-tokens
  // Charge each prefill token 1 + position / this many budget tokens (0: off); see
  // SchedulerConfig::attention_positions_per_token.
  int32_t attention_positions_per_token = 0;
  int32_t max_running = 256;
  int32_t max_preemptions = 8;
  bool prefix_caching = true;
  // The monotonic clock every engine timing is taken on (queue, prefill, first decode, TTFT,
  // decode); read on the engine thread and, for arrival stamps, on the thread calling add().
  // Not owned; must outlive the engine. nullptr: a MonotonicClock.
  const base::Clock* clock = nullptr;
  // Seeds for requests without one (called on the thread calling add()). Empty: a
  // std::random_device-seeded generator.
  std::function<uint64_t()> seed_source;
};

struct AddRequest {
  std::string request_id;  // echoed in the SequenceRecord (logs)
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  StopConditions stop;
};

class Engine {
 public:
  // Sizes the block pool from the config and ModelInfo::kv_bytes_per_token and asks the runner
  // for the KV storage (ModelRunner::allocate_kv). kExhausted when not even one block fits.
  static Result<std::unique_ptr<Engine>> create(model::ModelRunner& runner,
                                                const model::Tokenizer& tokenizer,
                                                EngineConfig config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Any thread. Validates the request (kBadRequest: empty prompt, token id out of range, prompt
  // not shorter than the context window, sampling parameters out of range, max_tokens < 1) and
  // queues it. Returns the sequence id used in its events.
  Result<SeqId> add(AddRequest request);
  // Any thread. Drops the sequence before the next step (client gone). Unknown or already
  // finished ids are ignored.
  void abort(SeqId id);

  // Set before start(). Called on the engine thread after a step that produced events.
  void set_wake_callback(std::function<void()> wake);
  // Any thread. Moves all pending events to `out` (appending); returns how many.
  size_t drain_events(std::vector<EngineEvent>& out);
  // Any thread. The snapshot taken after the last step.
  EngineStats stats() const;
  // Any thread. True when no sequence is queued, running or waiting to be added.
  bool idle() const;

  void start();
  void stop();

  // Manual driving (only when start() was not called): takes in pending commands and runs one
  // step. Returns false when there was nothing to do.
  bool step();

  const EngineConfig& config() const { return config_; }
  int32_t num_blocks() const { return kv_.num_blocks(); }

 private:
  Engine(model::ModelRunner& runner, const model::Tokenizer& tokenizer, EngineConfig config,
         int32_t num_blocks);

  struct Command {
    enum class Kind { kAdd, kAbort } kind = Kind::kAdd;
    std::unique_ptr<Sequence> seq;  // kAdd
    SeqId id = 0;                   // kAbort
  };

  void run_loop();
  bool take_commands();
  bool run_step();
  void apply_outputs(const StepPlan& plan, const std::vector<float>& logits, int64_t t0_us,
                     int64_t t1_us);
  void finish(Sequence* seq, proto::Cause cause, std::string message, EngineEvent* event,
              bool runner_error = false);
  EngineEvent& event_for(Sequence* seq);
  void publish();
  void refresh_stats();

  model::ModelRunner& runner_;
  const model::Tokenizer& tokenizer_;
  EngineConfig config_;
  base::MonotonicClock monotonic_clock_;
  const base::Clock* clock_;
  kv::KVCacheManager kv_;
  Scheduler scheduler_;
  Sampler sampler_;
  LogprobsCalculator logprobs_;

  // Engine-thread state.
  std::unordered_map<SeqId, std::unique_ptr<Sequence>> seqs_;
  std::vector<EngineEvent> step_events_;
  std::unordered_map<SeqId, size_t> step_event_index_;
  std::vector<float> logits_;
  EngineStats local_stats_;

  // Shared state (mu_).
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Command> commands_;
  std::vector<EngineEvent> events_;
  EngineStats stats_;
  int64_t next_id_ = 1;
  int64_t live_sequences_ = 0;  // added and not yet finished
  bool stopping_ = false;
  std::function<void()> wake_;
  std::function<uint64_t()> seed_source_;
  std::thread thread_;
  bool started_ = false;
};

}  // namespace cutline::engine
