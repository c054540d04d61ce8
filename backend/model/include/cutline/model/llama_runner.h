#pragma once
// LlamaRunner: the decoder forward pass for every architecture ModelConfig describes (llama,
// qwen2, qwen3, phi3, gemma2, gemma3) implementing ModelRunner on a device::Device. GQA, RoPE
// (interleaved or neox; freq_base, linear / YaRN / Llama 3.1 / phi3 long-RoPE scaling), RMSNorm
// (also per q/k head and after attention/FFN), SwiGLU or GeGLU, tied or untied output, QKV bias,
// fused QKV and gate-up tensors, sliding-window layers, attention and final logit soft-caps;
// K/V in F32 in paged storage addressed through the engine's block tables. What the Device
// interface has no op for (GeGLU, soft-caps, a binding sliding window, the RoPE magnitude factor)
// runs on host memory (host_ops.h): in place on the CPU device, staged on others.
//
// Who calls it: the residency manager loads it (LoadReport gives the phase timings it reports);
// the engine thread calls forward(). On the CPU device the weights stay zero-copy in the GGUF
// mmap (the GgufFile is kept alive by the runner); the CUDA device holds F16 copies.
//
// Batch invariance: every op reduces each row in a fixed order (see device.h), so a sequence's
// logits do not depend on the rest of the batch or on how its prompt was chunked (CPU device).

#include <memory>
#include <vector>

#include "cutline/device/device.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/model_config.h"
#include "cutline/model/model_runner.h"

namespace cutline::model {

// Wall-clock phases of a load on one monotonic clock (milliseconds).
struct LoadReport {
  double read_ms = 0;        // bringing the tensor bytes into memory (page cache / mmap)
  double convert_ms = 0;     // dequantizing / re-laying out on the host
  double upload_ms = 0;      // host -> device copies
  double warmup_ms = 0;      // one forward step on a scratch KV block
  double kv_alloc_ms = 0;    // the last allocate_kv()
  int64_t bytes_read = 0;    // tensor bytes touched by the read phase
  int64_t device_bytes = 0;  // weight bytes copied to the device (0 when zero-copy)
};

struct LlamaLoadOptions {
  std::string name;    // ModelInfo::name; the GGUF general.name when empty
  bool warmup = true;  // run one token through the model at load
};

class LlamaRunner final : public ModelRunner {
 public:
  // Loads `file` (validated by load_model_config) onto `device`. kUnsupported for a tensor type
  // the device cannot use, naming the tensor.
  static Result<std::unique_ptr<LlamaRunner>> load(std::shared_ptr<const GgufFile> file,
                                                   std::shared_ptr<device::Device> device,
                                                   const LlamaLoadOptions& options = {});
  ~LlamaRunner() override;

  const ModelInfo& info() const override { return info_; }
  const ModelConfig& config() const { return config_; }
  const LoadReport& load_report() const { return report_; }
  device::Device& device() const { return *device_; }

  Status allocate_kv(int32_t n_blocks, int32_t block_size) override;
  Status forward(const ForwardBatch& batch, std::vector<float>& logits) override;
  int64_t device_free_bytes() const override { return device_->free_bytes(); }

 private:
  struct Layer;
  struct Scratch;
  struct BatchIndex;
  // One forward step's index arrays (device copies) and their host originals.
  struct Step {
    int64_t n = 0;
    const int32_t* d_pos = nullptr;
    const int32_t* d_slots = nullptr;
    const std::vector<int32_t>* tables = nullptr;
    const std::vector<device::AttentionToken>* tokens = nullptr;
    device::AttentionArgs attn;  // block_tables, tokens, n_tokens, max_pos set
  };
  LlamaRunner() = default;
  Status load_weights(LoadReport& report);
  Status load_layer(int32_t layer, LoadReport& report);
  Status ensure_scratch(int64_t rows, int64_t n_ints);
  Status check_batch(const ForwardBatch& batch) const;
  void index_batch(const ForwardBatch& batch, BatchIndex& index) const;
  Status upload_index(BatchIndex& index, Step& step);
  Status output_logits(const BatchIndex& index, std::vector<float>& logits);
  void attention_block(int32_t layer, const Step& step);
  void ffn_block(int32_t layer, const Step& step);

  std::shared_ptr<const GgufFile> file_;
  std::shared_ptr<device::Device> device_;
  ModelConfig config_;
  ModelInfo info_;
  LoadReport report_;

  device::Weight token_embd_;
  device::Weight output_;  // empty (rows == 0) when tied to token_embd_
  device::Buffer output_norm_;
  device::Buffer rope_factors_;     // per-pair frequency divisors (rope_scaling.h)
  device::RopeParams rope_global_;  // global layers
  device::RopeParams rope_local_;   // sliding-window layers (differs for gemma3)
  float rope_mscale_ = 1.0f;        // YaRN / long-RoPE magnitude of the rotated dims
  std::vector<Layer> layers_;
  std::unique_ptr<Scratch> scratch_;

  device::Buffer kv_;  // [n_layers][K|V][n_blocks * block_size][kv_dim] F32
  int32_t kv_blocks_ = 0;
  int32_t block_size_ = 0;
};

}  // namespace cutline::model
