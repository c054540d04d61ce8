#include "cutline/model/model_config.h"

#include <cmath>
#include <limits>
#include <vector>

namespace cutline::model {

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string shape_string(const GgufTensor& t) {
  return shape_string(std::vector<int64_t>(t.shape.begin(), t.shape.begin() + t.n_dims));
}

// A positive int32 hyper-parameter `<arch>.<suffix>`.
Status read_dim(const GgufFile& f, const std::string& key, bool required, int32_t fallback,
                int32_t& out) {
  auto v = required ? f.get_int(key) : f.get_int_or(key, fallback);
  if (!v) return std::move(v).error();
  if (*v <= 0 || *v > std::numeric_limits<int32_t>::max()) {
    return f.error(ErrorKind::kBadRequest, "metadata key '" + key + "' is " + std::to_string(*v) +
                                               ", expected a positive "
                                               "32-bit integer");
  }
  out = static_cast<int32_t>(*v);
  return {};
}

Status read_float(const GgufFile& f, const std::string& key, double fallback, float& out) {
  auto v = f.get_float_or(key, fallback);
  if (!v) return std::move(v).error();
  if (!std::isfinite(*v) || *v <= 0) {
    return f.error(ErrorKind::kBadRequest, "metadata key '" + key + "' is " + std::to_string(*v) +
                                               ", expected a positive number");
  }
  out = static_cast<float>(*v);
  return {};
}

Status expect_tensor(const GgufFile& f, const std::string& name, std::vector<int64_t> shape,
                     bool f32_only) {
  const GgufTensor* t = f.tensor(name);
  if (!t) {
    return f.error(ErrorKind::kBadRequest,
                   "tensor '" + name + "' is missing (expected shape " + shape_string(shape) + ")");
  }
  bool same = t->n_dims == static_cast<int32_t>(shape.size());
  for (size_t d = 0; same && d < shape.size(); ++d) same = t->shape[d] == shape[d];
  if (!same) {
    return f.error(ErrorKind::kBadRequest, "tensor '" + name + "' has shape " + shape_string(*t) +
                                               ", expected " + shape_string(shape));
  }
  if (f32_only && t->type != TensorType::kF32) {
    return f.error(ErrorKind::kUnsupported, "tensor '" + name + "' has type " +
                                                tensor_type_name(t->type) + ", expected f32");
  }
  return {};
}

}  // namespace

Result<ModelConfig> load_model_config(const GgufFile& f) {
  ModelConfig c;
  auto arch = f.get_string("general.architecture");
  if (!arch) return std::move(arch).error();
  c.architecture = std::string(*arch);
  if (c.architecture != "llama" && c.architecture != "qwen2") {
    return f.error(ErrorKind::kUnsupported, "architecture '" + c.architecture +
                                                "' is not supported (supported: llama, qwen2)");
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

  for (auto [suffix, out] :
       {std::pair{"block_count", &c.n_layers}, std::pair{"embedding_length", &c.dim},
        std::pair{"attention.head_count", &c.n_heads}, std::pair{"feed_forward_length", &c.ffn_dim},
        std::pair{"context_length", &c.context_length}}) {
    if (auto s = read_dim(f, p + suffix, true, 0, *out); !s) return std::move(s).error();
  }
  if (auto s = read_dim(f, p + "attention.head_count_kv", false, c.n_heads, c.n_kv_heads); !s) {
    return std::move(s).error();
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
    return std::move(s).error();
  }
  int32_t value_length = 0;
  if (auto s = read_dim(f, p + "attention.value_length", false, c.head_dim, value_length); !s) {
    return std::move(s).error();
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
  if (auto s = read_dim(f, p + "rope.dimension_count", false, c.head_dim, c.rope_dim); !s) {
    return std::move(s).error();
  }
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return f.error(ErrorKind::kBadRequest,
                   "metadata key '" + p + "rope.dimension_count' is " + std::to_string(c.rope_dim) +
                       ", expected an even number <= the head size " + std::to_string(c.head_dim));
  }
  c.rope_style = c.architecture == "qwen2" ? RopeStyle::kNeox : RopeStyle::kInterleaved;
  if (auto s = read_float(f, p + "rope.freq_base", 10000.0, c.rope_freq_base); !s) {
    return std::move(s).error();
  }
  if (auto s = read_float(f, p + "attention.layer_norm_rms_epsilon", 1e-5, c.rms_eps); !s) {
    return std::move(s).error();
  }

  // RoPE scaling: rope.scaling.type + rope.scaling.factor, or the older rope.scale_linear.
  auto scaling = f.get_string_or(p + "rope.scaling.type", "none");
  if (!scaling) return std::move(scaling).error();
  if (*scaling == "linear") {
    if (auto s = read_float(f, p + "rope.scaling.factor", 1.0, c.rope_linear_scale); !s) {
      return std::move(s).error();
    }
  } else if (*scaling == "none") {
    if (auto s = read_float(f, p + "rope.scale_linear", 1.0, c.rope_linear_scale); !s) {
      return std::move(s).error();
    }
  } else {
    return f.error(ErrorKind::kUnsupported, "RoPE scaling '" + std::string(*scaling) +
                                                "' (metadata key '" + p +
                                                "rope.scaling.type') is not supported "
                                                "(supported: none, linear)");
  }

  const GgufTensor* embd = f.tensor("token_embd.weight");
  if (!embd) return f.error(ErrorKind::kBadRequest, "tensor 'token_embd.weight' is missing");
  if (embd->n_dims != 2 || embd->shape[0] != c.dim) {
    return f.error(ErrorKind::kBadRequest, "tensor 'token_embd.weight' has shape " +
                                               shape_string(*embd) + ", expected [" +
                                               std::to_string(c.dim) + ", <vocabulary size>]");
  }
  if (embd->shape[1] > std::numeric_limits<int32_t>::max()) {
    return f.error(ErrorKind::kBadRequest, "tensor 'token_embd.weight' has too many rows");
  }
  c.vocab_size = static_cast<int32_t>(embd->shape[1]);
  c.tied_output = f.tensor("output.weight") == nullptr;
  c.qkv_bias = f.tensor("blk.0.attn_q.bias") != nullptr;
  c.rope_freq_factors = f.tensor("rope_freqs.weight") != nullptr;

  if (auto s = validate_model_tensors(f, c); !s) return std::move(s).error();
  return c;
}

Status validate_model_tensors(const GgufFile& f, const ModelConfig& c) {
  const int64_t dim = c.dim, vocab = c.vocab_size, q = c.q_dim(), kv = c.kv_dim(), ffn = c.ffn_dim;
  if (auto s = expect_tensor(f, "token_embd.weight", {dim, vocab}, false); !s) return s;
  if (auto s = expect_tensor(f, "output_norm.weight", {dim}, true); !s) return s;
  if (!c.tied_output) {
    if (auto s = expect_tensor(f, "output.weight", {dim, vocab}, false); !s) return s;
  }
  if (c.rope_freq_factors) {
    if (auto s = expect_tensor(f, "rope_freqs.weight", {c.rope_dim / 2}, true); !s) return s;
  }
  for (int32_t layer = 0; layer < c.n_layers; ++layer) {
    const std::string b = "blk." + std::to_string(layer) + ".";
    struct Expected {
      const char* name;
      std::vector<int64_t> shape;
      bool f32_only;
    };
    std::vector<Expected> expected = {
        {"attn_norm.weight", {dim}, true},       {"attn_q.weight", {dim, q}, false},
        {"attn_k.weight", {dim, kv}, false},     {"attn_v.weight", {dim, kv}, false},
        {"attn_output.weight", {q, dim}, false}, {"ffn_norm.weight", {dim}, true},
        {"ffn_gate.weight", {dim, ffn}, false},  {"ffn_up.weight", {dim, ffn}, false},
        {"ffn_down.weight", {ffn, dim}, false},
    };
    if (c.qkv_bias) {
      expected.push_back({"attn_q.bias", {q}, true});
      expected.push_back({"attn_k.bias", {kv}, true});
      expected.push_back({"attn_v.bias", {kv}, true});
    }
    for (const Expected& e : expected) {
      if (auto s = expect_tensor(f, b + e.name, e.shape, e.f32_only); !s) return s;
    }
  }
  return {};
}

}  // namespace cutline::model
