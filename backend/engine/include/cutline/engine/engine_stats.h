#pragma once
// EngineStats: an engine-wide snapshot for Prometheus and /v1/cutline/state, refreshed by the
// engine thread after every step (and after commands are taken in). Counters are cumulative.

#include <array>
#include <cstdint>

#include "cutline/proto/wire/stop_record.h"

namespace cutline::engine {

struct EngineStats {
  // Gauges.
  int32_t queue_depth = 0;  // sequences waiting for admission (including preempted ones)
  int32_t running = 0;      // sequences holding KV blocks
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;
  int32_t kv_blocks_free = 0;    // allocatable, including cached-but-unreferenced blocks
  int32_t kv_blocks_cached = 0;  // holding a reusable prefix block
  int32_t block_size = 0;
  int64_t kv_bytes_per_block = 0;
  int32_t last_step_tokens = 0;  // tokens in the last forward step
  int32_t last_step_sequences = 0;

  // Counters.
  int64_t steps = 0;
  int64_t step_tokens_total = 0;
  int64_t prefill_tokens_total = 0;
  int64_t decode_tokens_total = 0;
  int64_t preemptions_total = 0;
  int64_t prefix_queries = 0;
  int64_t prefix_hits = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t kv_evictions = 0;
  int64_t sequences_added = 0;
  int64_t sequences_finished = 0;
  int64_t output_tokens_total = 0;
  std::array<int64_t, proto::kCauseCount> finished_by_cause{};  // index: static_cast<int>(Cause)
};

}  // namespace cutline::engine
