#pragma once
// ModelRunner: the contract between the serving engine (backend/engine) and a loaded model.
// The engine owns scheduling and the KV block tables (backend/kv); the runner owns the weights
// and the physical KV storage on its device, and runs one forward step over a batch of sequences
// whose K/V live in fixed-size blocks addressed through per-sequence block tables.
//
// Called only from the engine thread. Never throws; failures are values.
//
// Batch invariance (required): the logits of one sequence must be bitwise identical whatever else
// is in the batch, however its prompt was split into prefill chunks, and after a preemption and
// recompute. Kernels therefore reduce each row in a fixed order that depends only on that row.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cutline/base/result.h"

namespace cutline::model {

// What the engine needs to know about a model to schedule it.
struct ModelInfo {
  std::string name;          // e.g. the GGUF general.name or the --model NAME
  std::string architecture;  // general.architecture: "llama", "qwen2", "gemma3", ...
  int32_t vocab_size = 0;
  int32_t context_length = 0;  // the model's context window in tokens
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  // Bytes of K and V for one token across all layers (what one KV slot costs).
  int64_t kv_bytes_per_token = 0;
  int64_t weight_bytes = 0;  // resident weight bytes on the device
};

// One sequence's slice of a forward step: either a prefill chunk (many tokens) or a decode step
// (one token). Positions [0, start_pos) are already in the KV cache; this step writes K/V for
// positions [start_pos, start_pos + tokens.size()).
struct SequenceStep {
  int64_t seq_id = 0;
  std::span<const int32_t> tokens;
  int32_t start_pos = 0;
  // Physical block ids covering positions [0, start_pos + tokens.size()), in order.
  std::span<const int32_t> block_table;
  // Produce logits for the last token of this step (decode steps and a prompt's last chunk).
  bool want_logits = false;
};

struct ForwardBatch {
  std::vector<SequenceStep> steps;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const ModelInfo& info() const = 0;

  // Allocates physical KV storage for `n_blocks` blocks of `block_size` tokens each on the
  // runner's device. May be called again to resize (existing contents are discarded).
  // kExhausted when the device cannot hold it.
  virtual Status allocate_kv(int32_t n_blocks, int32_t block_size) = 0;

  // Runs one step. On success `logits` holds one row of info().vocab_size floats for each step
  // with want_logits, in the order of batch.steps. Token ids out of range, block tables too short
  // or positions past the context window are kBadRequest errors, not crashes.
  virtual Status forward(const ForwardBatch& batch, std::vector<float>& logits) = 0;

  // Bytes free on the runner's device now (host RAM for the CPU device).
  virtual int64_t device_free_bytes() const = 0;
};

}  // namespace cutline::model
