#pragma once
// ModelConfig: the hyper-parameters of a Llama-family model read from GGUF metadata, for the
// architectures `llama` (Llama 2/3, Mistral, SmolLM, TinyLlama) and `qwen2` (QKV bias), and the
// check that the file holds every tensor the forward pass needs with the expected shape.
//
// Who calls it: the model loader (device helper's Llama model) before touching tensors, and the
// residency layer to size KV caches. Tensor names follow llama.cpp: token_embd.weight,
// output_norm.weight, output.weight (absent = tied to token_embd), blk.N.attn_norm.weight,
// blk.N.attn_{q,k,v,output}.weight, blk.N.attn_{q,k,v}.bias (qwen2), blk.N.ffn_norm.weight,
// blk.N.ffn_{gate,up,down}.weight, rope_freqs.weight (Llama 3.1 frequency factors, optional).

#include <cstdint>
#include <string>

#include "cutline/model/gguf_file.h"
#include "cutline/proto/result.h"

namespace cutline::model {

// How RoPE pairs the dimensions of a head.
enum class RopeStyle {
  kInterleaved,  // pairs (2i, 2i+1): ggml "norm", used by `llama` GGUF files
  kNeox,         // pairs (i, i + rope_dim/2): ggml "neox", used by `qwen2`
};

struct ModelConfig {
  std::string architecture;  // "llama" | "qwen2"
  std::string name;          // general.name, or "" when absent
  int32_t n_layers = 0;
  int32_t dim = 0;  // embedding length
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;  // == n_heads without GQA
  int32_t head_dim = 0;    // attention.key_length, default dim / n_heads
  int32_t ffn_dim = 0;     // feed_forward_length
  int32_t vocab_size = 0;  // rows of token_embd.weight
  int32_t context_length = 0;
  int32_t rope_dim = 0;  // rope.dimension_count, default head_dim
  RopeStyle rope_style = RopeStyle::kInterleaved;
  float rope_freq_base = 10000.0f;
  // Linear RoPE scaling: positions are divided by this factor (1 = none).
  float rope_linear_scale = 1.0f;
  bool rope_freq_factors = false;  // rope_freqs.weight present ([rope_dim / 2] f32)
  float rms_eps = 1e-5f;
  bool tied_output = false;  // output.weight absent: logits use token_embd.weight
  bool qkv_bias = false;     // attn_q/k/v.bias present (qwen2)

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
};

// Reads the config from metadata and validates the tensors (existence and shapes). Errors name
// the file and the key or tensor: "m.gguf: tensor 'blk.3.attn_k.weight' has shape [64, 32],
// expected [64, 64]"; kUnsupported for another architecture ("architecture 'mamba' is not
// supported (supported: llama, qwen2)").
Result<ModelConfig> load_model_config(const GgufFile& file);

// The tensor-shape check on its own (load_model_config runs it).
Status validate_model_tensors(const GgufFile& file, const ModelConfig& config);

}  // namespace cutline::model
