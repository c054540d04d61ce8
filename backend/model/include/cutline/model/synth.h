#pragma once
// The built-in tiny model: synthesize_tiny_model() writes a valid GGUF (architecture `llama` by
// default; `qwen2`, `qwen3`, `phi3`, `gemma2` or `gemma3` with SynthOptions::arch, each with the
// tensors and metadata keys llama.cpp's converter writes for it) with
// deterministic pseudo-random weights (splitmix64, identical on every platform and library
// version for a given seed and options), a byte-level BPE vocabulary learned from the bundled
// text (backend/model/data), BOS/EOS and ChatML control tokens, and a ChatML chat template.
// The file is loaded like any other GGUF (GgufFile, load_model_config, load_tokenizer).
//
// Who calls it: `cutline model synth`, tests, and the backend for `--model tiny=builtin` (through
// ensure_builtin_model). Weights are streamed to disk, so multi-GiB benchmark models take one
// pass and little memory.

#include <cstdint>
#include <functional>
#include <string>

#include "cutline/base/result.h"
#include "cutline/model/tensor_type.h"

namespace cutline::model {

struct SynthOptions {
  int32_t layers = 2;
  int32_t dim = 64;
  int32_t heads = 4;
  int32_t kv_heads = 2;
  int32_t vocab = 512;  // >= 256 + 4 (bytes + specials); the rest are learned merges
  int32_t ffn = 0;      // 0: 8/3 * dim rounded up to a multiple of 32
  int32_t context = 2048;
  uint64_t seed = 1;
  // Type of the 2-D weight matrices (token_embd, attention, FFN, output): any supported type
  // (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS; the K-quants and IQ4_XS
  // need --dim and --ffn multiples of 256). Norm weights are always F32.
  TensorType type = TensorType::kF16;
  bool tied_output = false;  // omit output.weight (logits from token_embd); always for gemma
  std::string name = "cutline-tiny";
  // Called after each tensor is written: tensor bytes written so far and in all (for a
  // progress bar; may be empty).
  std::function<void(int64_t done_bytes, int64_t total_bytes)> progress;
  // Architecture-specific (model_config.h says what each means).
  std::string arch = "llama";         // llama | qwen2 | qwen3 | phi3 | gemma2 | gemma3
  int32_t sliding_window = 0;         // <arch>.attention.sliding_window; 0: none (gemma: 32)
  float attn_softcap = 0;             // gemma2 only; 0: 50
  float final_softcap = 0;            // gemma2 only; 0: 30
  std::string rope_scaling;           // "" | "linear" | "yarn" (rope.scaling.type)
  float rope_factor = 1.0f;           // rope.scaling.factor
  int32_t rope_original_context = 0;  // YaRN / long RoPE; 0: context / 4
  bool rope_freq_factors = false;     // write rope_freqs.weight (Llama 3.1 style)
  bool long_rope = false;             // phi3: rope_factors_long/short.weight + attn_factor
};

// The ffn dim actually used for these options.
int32_t synth_ffn_dim(const SynthOptions& options);

// kBadRequest naming the option for invalid options (dim not divisible by heads, heads not a
// multiple of kv_heads, odd head_dim, vocab too small, a row not a multiple of the quant block);
// kIo when the file cannot be written.
Status synthesize_tiny_model(const SynthOptions& options, const std::string& path);

// The default tiny model in `cache_dir` (created when missing): synthesized on first use under a
// temporary name and renamed into place atomically, so concurrent callers and crashes never
// leave a half-written file. Returns the model's path.
Result<std::string> ensure_builtin_model(const std::string& cache_dir);

}  // namespace cutline::model
