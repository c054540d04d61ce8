#pragma once
// The built-in tiny model: synthesize_tiny_model() writes a valid Llama-architecture GGUF with
// deterministic pseudo-random weights (splitmix64, identical on every platform and library
// version for a given seed and options), a byte-level BPE vocabulary learned from the bundled
// text (backend/model/data), BOS/EOS and ChatML control tokens, and a ChatML chat template.
// The file is loaded like any other GGUF (GgufFile, load_model_config, load_tokenizer).
//
// Who calls it: `cutline model synth`, tests, and the backend for `--model tiny=builtin` (through
// ensure_builtin_model). Weights are streamed to disk, so multi-GiB benchmark models take one
// pass and little memory.

#include <cstdint>
#include <string>

#include "cutline/model/tensor_type.h"
#include "cutline/proto/result.h"

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
  bool tied_output = false;  // omit output.weight (logits from token_embd)
  std::string name = "cutline-tiny";
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
