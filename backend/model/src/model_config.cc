#include "cutline/model/model_config.h"

#include <cmath>
#include <limits>
#include <vector>

#include "model_tensors.h"

namespace cutline::model {

namespace {

constexpr const char* kSupported = "llama, qwen2, qwen3, phi3, gemma2, gemma3";

bool is_supported(const std::string& arch) {
  for (const char* a : {"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"}) {
    if (arch == a) return true;
  }
  return false;
}

// A positive int32 hyper-parameter.
Status read_dim(const GgufFile& f, const std::string& key, bool required, int32_t fallback,
                int32_t& out) {
  auto v = required ? f.get_int(key) : f.get_int_or(key, fallback);
  if (!v) return std::move(v).error();
  if (*v <= 0 || *v > std::numeric_limits<int32_t>::max()) {
    return f.error(ErrorKind::kBadRequest, "metadata key '" + key + "' is " + std::to_string(*v) +
                                               ", expected a positive 32-bit integer");
  }
  out = static_cast<int32_t>(*v);
  return {};
}

Status read_float(const GgufFile& f, const std::string& key, double fallback, float& out) {
  auto v = f.get_float_or(key, fallback);
  if (!v) return std::move(v).error();
  if (!std::isfinite(*v) || *v <= 0 || *v > std::numeric_limits<float>::max()) {
    return f.error(ErrorKind::kBadRequest, "metadata key '" + key + "' is " + std::to_string(*v) +
                                               ", expected a positive number");
  }
  out = static_cast<float>(*v);
  return {};
}

// `what` (a width computed from metadata, in 64 bits) must fit the runner's buffers.
Status check_width(const GgufFile& f, const std::string& what, int64_t width) {
  if (width <= 0 || width > kMaxRowWidth) {
    return f.error(ErrorKind::kBadRequest, what + " is " + std::to_string(width) +
                                               ", expected at most " +
                                               std::to_string(kMaxRowWidth));
  }
  return {};
}

Status read_dims(const GgufFile& f, const std::string& p, ModelConfig& c) {
  for (auto [suffix, out] :
       {std::pair{"block_count", &c.n_layers}, std::pair{"embedding_length", &c.dim},
        std::pair{"attention.head_count", &c.n_heads}, std::pair{"feed_forward_length", &c.ffn_dim},
        std::pair{"context_length", &c.context_length}}) {
    if (auto s = read_dim(f, p + suffix, true, 0, *out); !s) return s;
  }
  if (auto s = read_dim(f, p + "attention.head_count_kv", false, c.n_heads, c.n_kv_heads); !s) {
    return s;
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    return f.error(ErrorKind::kBadRequest, "metadata key '" + p + "attention.head_count_kv' is " +
                                               std::to_string(c.n_kv_heads) +
                                               ", expected a divisor of the head count " +
                                               std::to_string(c.n_heads));
  }
  if (!f.has(p + "attention.key_length") && c.dim % c.n_heads != 0) {
    return f.error(ErrorKind::kBadRequest,
                   "metadata key '" + p + "embedding_length' is " + std::to_string(c.dim) +
                       ", expected a multiple of the head count " + std::to_string(c.n_heads));
  }
  if (auto s = read_dim(f, p + "attention.key_length", false, c.dim / c.n_heads, c.head_dim); !s) {
    return s;
  }
  int32_t value_length = 0;
  if (auto s = read_dim(f, p + "attention.value_length", false, c.head_dim, value_length); !s) {
    return s;
  }
  if (value_length != c.head_dim) {
    return f.error(ErrorKind::kUnsupported,
                   "metadata key '" + p + "attention.value_length' is " +
                       std::to_string(value_length) + ", expected the key length " +
                       std::to_string(c.head_dim) + " (different K and V head sizes)");
  }
  if (c.head_dim % 2 != 0) {
    return f.error(ErrorKind::kBadRequest, "head size " + std::to_string(c.head_dim) +
                                               " is odd, expected an even size for RoPE");
  }
  // Every width a buffer is sized by, computed in 64 bits (a 32-bit product of a crafted head
  // count and key length can wrap to a small number that matches small tensors).
  const std::string heads = "'" + p + "attention.head_count' x '" + p + "attention.key_length'";
  const std::string kv_heads =
      "'" + p + "attention.head_count_kv' x '" + p + "attention.key_length'";
  for (auto [what, width] : {std::pair{"metadata key '" + p + "embedding_length'", int64_t{c.dim}},
                             {"metadata key '" + p + "feed_forward_length'", int64_t{c.ffn_dim}},
                             {heads, c.q_dim()},
                             {kv_heads, c.kv_dim()}}) {
    if (auto s = check_width(f, what, width); !s) return s;
  }
  return {};
}

Status read_rope(const GgufFile& f, const std::string& p, ModelConfig& c) {
  if (auto s = read_dim(f, p + "rope.dimension_count", false, c.head_dim, c.rope_dim); !s) return s;
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return f.error(ErrorKind::kBadRequest,
                   "metadata key '" + p + "rope.dimension_count' is " + std::to_string(c.rope_dim) +
                       ", expected an even number <= the head size " + std::to_string(c.head_dim));
  }
  c.rope_style = c.architecture == "llama" ? RopeStyle::kInterleaved : RopeStyle::kNeox;
  if (auto s = read_float(f, p + "rope.freq_base", 10000.0, c.rope_freq_base); !s) return s;
  if (auto s = read_float(f, p + "rope.scaling.attn_factor", 1.0, c.rope_attn_factor); !s) return s;
  if (auto s = read_dim(f, p + "rope.scaling.original_context_length", false, c.context_length,
                        c.yarn_original_context);
      !s) {
    return s;
  }

  // The factor is rope.scaling.factor, or the older rope.scale_linear, whatever the type (as
  // llama.cpp reads it); the type says how it applies.
  float factor = 1.0f;
  const std::string factor_key =
      f.has(p + "rope.scaling.factor") ? p + "rope.scaling.factor" : p + "rope.scale_linear";
  if (auto s = read_float(f, factor_key, 1.0, factor); !s) return s;
  auto scaling = f.get_string_or(p + "rope.scaling.type", "none");
  if (!scaling) return std::move(scaling).error();
  if (*scaling == "none" || *scaling == "linear" || *scaling == "longrope") {
    // longrope: the per-pair factors are tensors (phi3's rope_factors_long/short).
    c.rope_linear_scale = factor;
    if (*scaling == "linear" || factor != 1.0f) c.rope_scaling = RopeScaling::kLinear;
    return {};
  }
  if (*scaling == "yarn") {
    c.rope_scaling = RopeScaling::kYarn;
    c.yarn_factor = factor;
    if (auto s = read_float(f, p + "rope.scaling.yarn_beta_fast", 32.0, c.yarn_beta_fast); !s) {
      return s;
    }
    return read_float(f, p + "rope.scaling.yarn_beta_slow", 1.0, c.yarn_beta_slow);
  }
  return f.error(ErrorKind::kUnsupported, "RoPE scaling '" + std::string(*scaling) +
                                              "' (metadata key '" + p +
                                              "rope.scaling.type') is not supported "
                                              "(supported: none, linear, yarn, longrope)");
}

// Gemma's attention scale is 1/sqrt(query_pre_attn_scalar): dim / n_heads for the 27B models
// (46 layers for gemma2, 62 for gemma3), the head size otherwise (gemma_pytorch's configs, as
// llama.cpp derives it; the GGUF has no key for it).
float gemma_attention_scale(const ModelConfig& c) {
  const bool is_27b = (c.architecture == "gemma2" && c.n_layers == 46) ||
                      (c.architecture == "gemma3" && c.n_layers == 62);
  const int32_t query_pre_attn_scalar = is_27b ? c.dim / c.n_heads : c.head_dim;
  return 1.0f / std::sqrt(static_cast<float>(query_pre_attn_scalar));
}

// attention.sliding_window_pattern: a period (the last layer of each period is global), or one
// flag per layer (non-zero = sliding window), as llama.cpp reads it.
Status read_window_pattern(const GgufFile& f, const std::string& p, ModelConfig& c) {
  const std::string key = p + "attention.sliding_window_pattern";
  const GgufValue* v = f.find(key);
  if (v == nullptr) return {};
  if (auto flags = v->as_int_array()) {
    if (static_cast<int64_t>(flags->size()) != c.n_layers) {
      return f.error(ErrorKind::kBadRequest,
                     "metadata key '" + key + "' has " + std::to_string(flags->size()) +
                         " entries, expected one per layer (" + std::to_string(c.n_layers) + ")");
    }
    c.local_layers.assign(flags->begin(), flags->end());
    for (uint8_t& flag : c.local_layers) flag = flag != 0;
    return {};
  }
  return read_dim(f, key, false, c.swa_pattern, c.swa_pattern);
}

// The per-architecture conventions that are not in the metadata, then the optional keys.
Status read_architecture(const GgufFile& f, const std::string& p, ModelConfig& c) {
  const std::string& a = c.architecture;
  c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  int32_t default_window = 0;
  bool window_required = false;
  if (a == "qwen3") c.qk_norm = true;
  if (a == "phi3") {
    c.fused_qkv = f.tensor("blk.0.attn_qkv.weight") != nullptr;
    c.fused_gate_up = f.tensor("blk.0.ffn_gate.weight") == nullptr;
    c.rope_long_short_factors = f.tensor("rope_factors_long.weight") != nullptr;
    // Phi-3-mini/medium-4k files written before the key existed (llama.cpp's compatibility rule).
    if ((c.n_layers == 32 || c.n_layers == 40) && c.context_length == 4096) default_window = 2047;
  }
  if (a == "gemma2" || a == "gemma3") {
    c.post_norms = true;
    c.ffn_activation = FfnActivation::kGeluTanh;
    c.embedding_scale = std::sqrt(static_cast<float>(c.dim));
    c.attention_scale = gemma_attention_scale(c);
    c.swa_pattern = a == "gemma2" ? 2 : 6;
    default_window = 4096;
    window_required = a == "gemma3";
  }
  if (a == "gemma2") {
    if (auto s = read_float(f, p + "attn_logit_softcapping", 50.0, c.attn_softcap); !s) return s;
    if (auto s = read_float(f, p + "final_logit_softcapping", 30.0, c.final_softcap); !s) return s;
  }
  if (a == "gemma3") {
    c.qk_norm = true;
    c.local_rope_unscaled = true;
  }
  const double local_base = a == "gemma3" ? 10000.0 : c.rope_freq_base;
  if (auto s = read_float(f, p + "rope.freq_base_swa", local_base, c.rope_freq_base_local); !s) {
    return s;
  }
  // 0 or absent: no window (unless the architecture requires one).
  const std::string window_key = p + "attention.sliding_window";
  if (window_required && !f.has(window_key)) {
    return f.error(ErrorKind::kBadRequest,
                   "metadata key '" + window_key + "' is missing (required for " + a + ")");
  }
  auto window = f.get_int_or(window_key, default_window);
  if (!window) return std::move(window).error();
  if (*window < 0 || *window > std::numeric_limits<int32_t>::max()) {
    return f.error(ErrorKind::kBadRequest, "metadata key '" + window_key + "' is " +
                                               std::to_string(*window) +
                                               ", expected a 32-bit size (0 = no window)");
  }
  c.sliding_window = static_cast<int32_t>(*window);
  return read_window_pattern(f, p, c);
}

}  // namespace

const char* supported_architectures() { return kSupported; }

Result<ModelConfig> load_model_config(const GgufFile& f) {
  ModelConfig c;
  auto arch = f.get_string("general.architecture");
  if (!arch) return std::move(arch).error();
  c.architecture = std::string(*arch);
  if (!is_supported(c.architecture)) {
    return f.error(
        ErrorKind::kUnsupported,
        "architecture '" + c.architecture + "' is not supported (supported: " + kSupported + ")");
  }
  auto name = f.get_string_or("general.name", "");
  if (!name) return std::move(name).error();
  c.name = std::string(*name);
  const std::string p = c.architecture + ".";

  auto experts = f.get_int_or(p + "expert_count", 0);
  if (!experts) return std::move(experts).error();
  if (*experts > 0) {
    return f.error(ErrorKind::kUnsupported,
                   "mixture-of-experts models are not supported (metadata key '" + p +
                       "expert_count' is " + std::to_string(*experts) + ")");
  }
  if (auto s = read_dims(f, p, c); !s) return std::move(s).error();
  if (auto s = read_rope(f, p, c); !s) return std::move(s).error();
  if (auto s = read_float(f, p + "attention.layer_norm_rms_epsilon", 1e-5, c.rms_eps); !s) {
    return std::move(s).error();
  }
  if (auto s = read_architecture(f, p, c); !s) return std::move(s).error();
  if (c.rope_scaling == RopeScaling::kYarn && c.sliding_window > 0 && !c.local_rope_unscaled &&
      c.rope_freq_base_local != c.rope_freq_base) {
    return f.error(
        ErrorKind::kUnsupported,
        "YaRN RoPE scaling with another RoPE base for sliding-window layers (metadata key "
        "'" +
            p + "rope.freq_base_swa') is not supported");
  }

  const GgufTensor* embd = f.tensor("token_embd.weight");
  if (!embd) return f.error(ErrorKind::kBadRequest, "tensor 'token_embd.weight' is missing");
  if (embd->n_dims != 2 || embd->shape[0] != c.dim) {
    return f.error(ErrorKind::kBadRequest, "tensor 'token_embd.weight' has shape " +
                                               shape_string(*embd) + ", expected [" +
                                               std::to_string(c.dim) + ", <vocabulary size>]");
  }
  if (auto s = check_width(f, "the vocabulary size (rows of tensor 'token_embd.weight')",
                           embd->shape[1]);
      !s) {
    return std::move(s).error();
  }
  c.vocab_size = static_cast<int32_t>(embd->shape[1]);
  c.tied_output = f.tensor("output.weight") == nullptr;
  c.qkv_bias = f.tensor("blk.0.attn_q.bias") != nullptr;
  c.rope_freq_factors = f.tensor("rope_freqs.weight") != nullptr;
  if (c.rope_scaling == RopeScaling::kYarn && c.rope_freq_factors) {
    return f.error(ErrorKind::kUnsupported,
                   "YaRN RoPE scaling together with tensor 'rope_freqs.weight' is not supported");
  }

  if (auto s = validate_model_tensors(f, c); !s) return std::move(s).error();
  return c;
}

}  // namespace cutline::model
