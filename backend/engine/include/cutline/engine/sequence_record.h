#pragma once
// SequenceRecord: what the engine knows about one finished sequence, handed to the server with
// the sequence's last event so that it can fill the response's `cutline` object (StopRecord).
// All times are in ms on the engine's one monotonic Clock, measured from Engine::add.
//
// TTFT phases add up exactly: ttft_ms = queue_ms + prefill_ms + first_decode_ms, where
//   prefill_ms       = sum of the durations of the forward steps that ran a chunk of the prompt
//                      before the first token, the final chunk included (recompute after a
//                      preemption too): grows with prompt length and with whatever shares the
//                      steps (other sequences' decodes and chunks),
//   first_decode_ms  = from the end of the step that completed the prompt to the first token
//                      being sampled and queued for emission (penalties, sampling over the
//                      vocabulary, the sequences sampled before it in that step): grows with
//                      vocabulary size, sampling parameters and batch size,
//   queue_ms         = everything else before the first token (waiting for admission, steps
//                      between its chunks that did not include it).
// A prompt that fits in one step therefore reports its whole forward step as prefill.
// (The backend's load and warm-up phases belong to model residency, not to the engine.)

#include <cstdint>
#include <string>

#include "cutline/base/result.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::engine {

using SeqId = int64_t;

struct SequenceRecord {
  SeqId seq_id = 0;
  std::string request_id;  // as given in AddRequest
  proto::Cause cause = proto::Cause::kEos;
  // Detail for the record, e.g. "stop string \"\\n\\n\" matched", "preempted 9 times (limit 8)".
  std::string message;
  // Set when the sequence ended because the model runner failed (cause is kUpstreamError: for
  // the gateway the backend is the upstream); the server should answer with an error event.
  bool runner_error = false;

  int64_t input_tokens = 0;
  int64_t output_tokens = 0;         // tokens sampled, including an EOS or stop token
  int64_t cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache (first admission)

  double queue_ms = 0;
  double prefill_ms = 0;
  double first_decode_ms = 0;
  double ttft_ms = 0;      // 0 when no token was produced
  double decode_ms = 0;    // first token to finish
  double duration_ms = 0;  // add to finish
  double itl_mean_ms = 0;  // mean gap between consecutive output tokens (0 with < 2 tokens)
  double itl_max_ms = 0;

  int32_t preemptions = 0;
  int32_t kv_blocks_peak = 0;
  int64_t kv_bytes_peak = 0;      // kv_blocks_peak * block_size * kv_bytes_per_token
  int64_t device_free_bytes = 0;  // ModelRunner::device_free_bytes() at finish

  uint64_t seed = 0;            // the seed used (given or drawn)
  bool seed_generated = false;  // drawn by the engine because the request had none
};

// Copies the backend fields into a stop record (reporter "backend", count_method kEngine,
// cause, message, tokens, timings, phases, preemptions, KV bytes, device free bytes). Fields the
// engine does not know (policy, request max_tokens, load/warm-up phases) are left untouched.
void fill_stop_record(const SequenceRecord& rec, proto::StopRecord& out);

}  // namespace cutline::engine
