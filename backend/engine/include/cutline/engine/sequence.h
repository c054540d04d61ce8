#pragma once
// Sequence: the engine thread's state for one request — its tokens (prompt then output), how
// many of them have K/V in the cache, where it is in its life, its stop matcher and the
// timestamps its SequenceRecord is computed from. Owned by the Engine; the Scheduler holds
// pointers. Only the engine thread touches it.

#include <cstdint>
#include <string>
#include <vector>

#include "cutline/engine/sampling_params.h"
#include "cutline/engine/sequence_record.h"
#include "cutline/engine/stop_conditions.h"
#include "cutline/engine/stop_matcher.h"

namespace cutline::engine {

enum class SeqPhase { kWaiting, kRunning, kFinished };

struct Sequence {
  SeqId id = 0;
  std::string request_id;
  std::vector<int32_t> tokens;  // prompt followed by the output sampled so far
  int32_t prompt_len = 0;
  SamplingParams sampling;
  StopConditions stop;
  uint64_t seed = 0;
  bool seed_generated = false;
  StopMatcher matcher;

  SeqPhase phase = SeqPhase::kWaiting;
  int64_t num_computed = 0;  // leading tokens whose K/V are written in this admission
  int64_t admit_order = -1;  // increasing with each admission (newest = largest)
  int32_t preemptions = 0;
  int64_t cached_prompt_tokens = 0;
  int32_t kv_blocks_peak = 0;

  // Timestamps (us on the engine Clock) and accumulated phases.
  int64_t arrival_us = 0;
  int64_t first_token_us = -1;
  int64_t last_token_us = -1;
  int64_t prefill_us = 0;       // steps that ran prompt chunks before the first token
  int64_t first_decode_us = 0;  // end of the prompt's last step -> first token sampled
  int64_t itl_sum_us = 0;
  int64_t itl_max_us = 0;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output() const { return num_tokens() - prompt_len; }
  // Tokens still to feed the model before the next token can be sampled (1 when decoding).
  int64_t num_uncomputed() const { return num_tokens() - num_computed; }
  bool is_decoding() const { return num_uncomputed() == 1; }
};

}  // namespace cutline::engine
