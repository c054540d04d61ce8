#pragma once
// ModelConfig: the hyper-parameters of a decoder-only transformer read from GGUF metadata, and the
// check that the file holds every tensor the forward pass needs with the expected shape.
//
// Architectures (general.architecture), with the conventions of the reference implementation
// (llama.cpp's GGUF keys and tensor names; norm weights are applied as stored):
// - `llama` (Llama 2/3, Mistral, SmolLM, TinyLlama, DeepSeek-R1 llama distills): interleaved
//   RoPE, optional rope_freqs.weight (Llama 3.1 frequency factors);
// - `qwen2` (and DeepSeek-R1 qwen distills): neox RoPE, QKV bias when the file has it;
// - `qwen3`: neox RoPE, RMSNorm of each query and key head (attn_q_norm / attn_k_norm);
// - `phi3` (Phi-3, Phi-4-mini): neox RoPE, fused attn_qkv.weight (rows q | k | v) and fused
//   ffn_up.weight (rows gate | up); rope_factors_long/short.weight when the file has them;
// - `gemma2`, `gemma3` (text): embeddings scaled by sqrt(dim), post-attention and post-FFN norms,
//   GELU (tanh) gate, attention scale from query_pre_attn_scalar, sliding-window layers
//   interleaved with global ones (gemma2: every other layer; gemma3: 5 of 6, with RoPE base
//   10000 on the local layers), gemma2's attention and final logit soft-caps, gemma3's q/k norms.
//   The (1 + w) of Gemma's RMSNorm is already in the GGUF weights (the converter adds the 1).
// Any architecture may declare `<arch>.attention.sliding_window` (Mistral style: every layer).
//
// Every size is checked in 64 bits at load: a file whose widths or products overflow, or exceed
// kMaxRowWidth, is refused naming the key.
//
// Who calls it: the model loader before touching tensors, `cutline model info`, and the residency
// layer to size KV caches.

#include <cstdint>
#include <string>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/model/gguf_file.h"

namespace cutline::model {

// How RoPE pairs the dimensions of a head.
enum class RopeStyle {
  kInterleaved,  // pairs (2i, 2i+1): ggml "norm", used by `llama` GGUF files
  kNeox,         // pairs (i, i + rope_dim/2): ggml "neox", used by qwen2/qwen3/phi3/gemma
};

enum class FfnActivation {
  kSilu,      // SwiGLU: silu(gate) * up
  kGeluTanh,  // GeGLU with the tanh approximation of GELU: gelu(gate) * up (Gemma)
};

// RoPE scaling declared by `<arch>.rope.scaling.type`.
enum class RopeScaling { kNone, kLinear, kYarn };

// The widest activation row the runner accepts (floats): far above any released model (the
// widest vocabulary is 262144), far below what would overflow a buffer size computation.
constexpr int64_t kMaxRowWidth = int64_t{1} << 24;

struct ModelConfig {
  std::string architecture;  // "llama" | "qwen2" | "qwen3" | "phi3" | "gemma2" | "gemma3"
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
  RopeScaling rope_scaling = RopeScaling::kNone;
  // YaRN (rope_scaling == kYarn): the factor, the context the model was trained on, the ramp
  // bounds in rotations (llama.cpp's defaults 32 and 1) and the magnitude factor.
  float yarn_factor = 1.0f;
  int32_t yarn_original_context = 0;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor (YaRN, phi3 long RoPE)
  // phi3: rope_factors_long/short.weight present; the long ones are used when context_length
  // exceeds yarn_original_context (as llama.cpp does at the trained context).
  bool rope_long_short_factors = false;
  float rms_eps = 1e-5f;
  bool tied_output = false;    // output.weight absent: logits use token_embd.weight
  bool qkv_bias = false;       // attn_q/k/v.bias present (qwen2)
  bool qk_norm = false;        // attn_q_norm/attn_k_norm.weight ([head_dim], qwen3, gemma3)
  bool fused_qkv = false;      // attn_qkv.weight instead of attn_q/k/v (phi3)
  bool fused_gate_up = false;  // ffn_up.weight holds gate | up, no ffn_gate (phi3)
  bool post_norms = false;     // post_attention_norm / post_ffw_norm (gemma2, gemma3)
  FfnActivation ffn_activation = FfnActivation::kSilu;
  float embedding_scale = 1.0f;  // multiplies the token embeddings (sqrt(dim) for Gemma)
  float attention_scale = 0.0f;  // multiplies q.k before the softmax
  float attn_softcap = 0.0f;     // > 0: scores become c * tanh(scores / c) (gemma2)
  float final_softcap = 0.0f;    // > 0: logits become c * tanh(logits / c) (gemma2)
  // Sliding-window attention: a query at position p of a local layer sees keys (p - window, p].
  // 0 = none. Layer i is local when window > 0 and (swa_pattern <= 1 or
  // i % swa_pattern < swa_pattern - 1).
  int32_t sliding_window = 0;
  int32_t swa_pattern = 1;
  // Per-layer flags (1 = sliding window) when attention.sliding_window_pattern is an array;
  // they replace swa_pattern.
  std::vector<uint8_t> local_layers;
  float rope_freq_base_local = 10000.0f;  // RoPE base of local layers (rope.freq_base_swa)
  bool local_rope_unscaled = false;       // gemma3: local layers ignore rope scaling

  int64_t q_dim() const { return int64_t{n_heads} * head_dim; }
  int64_t kv_dim() const { return int64_t{n_kv_heads} * head_dim; }
  bool is_local_layer(int32_t layer) const {
    if (sliding_window <= 0) return false;
    if (!local_layers.empty()) return local_layers[layer] != 0;
    return swa_pattern <= 1 || layer % swa_pattern < swa_pattern - 1;
  }
  // Bytes of F32 K and V for one token across all layers.
  int64_t kv_bytes_per_token() const { return int64_t{2} * n_layers * kv_dim() * 4; }
};

// The architectures load_model_config accepts, for messages: "llama, qwen2, qwen3, ...".
const char* supported_architectures();

// Reads the config from metadata and validates the tensors (existence and shapes). Errors name
// the file and the key or tensor: "m.gguf: tensor 'blk.3.attn_k.weight' has shape [64, 32],
// expected [64, 64]"; kUnsupported for another architecture ("architecture 'mamba' is not
// supported (supported: llama, ...)").
Result<ModelConfig> load_model_config(const GgufFile& file);

// The tensor-shape check on its own (load_model_config runs it).
Status validate_model_tensors(const GgufFile& file, const ModelConfig& config);

}  // namespace cutline::model
