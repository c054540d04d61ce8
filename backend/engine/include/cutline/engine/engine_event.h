#pragma once
// EngineEvent: what the engine tells the server about one sequence after a step. At most one
// event per sequence per step; the last event of a sequence has `finished` set and carries its
// SequenceRecord. Every sequence accepted by Engine::add gets exactly one finished event —
// also when aborted (cause kClientCancel) — unless the engine is destroyed first.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cutline/engine/sequence_record.h"
#include "cutline/engine/token_logprobs.h"

namespace cutline::engine {

struct EngineEvent {
  SeqId seq_id = 0;
  // Output tokens sampled in this step (0 or 1 today), including a final EOS/stop token.
  std::vector<int32_t> tokens;
  // One entry per element of `tokens` when the sequence asked for logprobs
  // (SamplingParams::logprobs >= 0); empty otherwise.
  std::vector<TokenLogprobs> logprobs;
  // Output bytes now safe to emit: stop strings are never included and bytes that could begin
  // one are held back until they cannot. Control tokens (EOS...) contribute nothing. May end
  // inside a UTF-8 character: pass it through a model::Utf8Streamer.
  std::string text;
  bool finished = false;
  std::optional<SequenceRecord> record;  // set iff finished
};

}  // namespace cutline::engine
