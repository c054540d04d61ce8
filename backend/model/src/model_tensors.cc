// validate_model_tensors: every tensor the forward pass reads exists with the shape the config
// implies, per architecture (see model_config.h).
#include <vector>

#include "cutline/model/model_config.h"
#include "model_tensors.h"

namespace cutline::model {

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

namespace {

struct Expected {
  std::string name;
  std::vector<int64_t> shape;
  bool f32_only;
};

Status expect_tensor(const GgufFile& f, const Expected& e) {
  const GgufTensor* t = f.tensor(e.name);
  if (!t) {
    return f.error(ErrorKind::kBadRequest, "tensor '" + e.name + "' is missing (expected shape " +
                                               shape_string(e.shape) + ")");
  }
  bool same = t->n_dims == static_cast<int32_t>(e.shape.size());
  for (size_t d = 0; same && d < e.shape.size(); ++d) same = t->shape[d] == e.shape[d];
  if (!same) {
    return f.error(ErrorKind::kBadRequest, "tensor '" + e.name + "' has shape " + shape_string(*t) +
                                               ", expected " + shape_string(e.shape));
  }
  if (e.f32_only && t->type != TensorType::kF32) {
    return f.error(ErrorKind::kUnsupported, "tensor '" + e.name + "' has type " +
                                                tensor_type_name(t->type) + ", expected f32");
  }
  return {};
}

std::vector<Expected> layer_tensors(const ModelConfig& c, const std::string& b) {
  const int64_t dim = c.dim, q = c.q_dim(), kv = c.kv_dim(), ffn = c.ffn_dim, hd = c.head_dim;
  std::vector<Expected> e = {{b + "attn_norm.weight", {dim}, true},
                             {b + "attn_output.weight", {q, dim}, false},
                             {b + "ffn_norm.weight", {dim}, true},
                             {b + "ffn_down.weight", {ffn, dim}, false}};
  if (c.fused_qkv) {
    e.push_back({b + "attn_qkv.weight", {dim, q + 2 * kv}, false});
  } else {
    e.push_back({b + "attn_q.weight", {dim, q}, false});
    e.push_back({b + "attn_k.weight", {dim, kv}, false});
    e.push_back({b + "attn_v.weight", {dim, kv}, false});
  }
  if (c.fused_gate_up) {
    e.push_back({b + "ffn_up.weight", {dim, 2 * ffn}, false});
  } else {
    e.push_back({b + "ffn_gate.weight", {dim, ffn}, false});
    e.push_back({b + "ffn_up.weight", {dim, ffn}, false});
  }
  if (c.qkv_bias) {
    e.push_back({b + "attn_q.bias", {q}, true});
    e.push_back({b + "attn_k.bias", {kv}, true});
    e.push_back({b + "attn_v.bias", {kv}, true});
  }
  if (c.qk_norm) {
    e.push_back({b + "attn_q_norm.weight", {hd}, true});
    e.push_back({b + "attn_k_norm.weight", {hd}, true});
  }
  if (c.post_norms) {
    e.push_back({b + "post_attention_norm.weight", {dim}, true});
    e.push_back({b + "post_ffw_norm.weight", {dim}, true});
  }
  return e;
}

}  // namespace

Status validate_model_tensors(const GgufFile& f, const ModelConfig& c) {
  const int64_t dim = c.dim, vocab = c.vocab_size;
  std::vector<Expected> global = {{"token_embd.weight", {dim, vocab}, false},
                                  {"output_norm.weight", {dim}, true}};
  if (!c.tied_output) global.push_back({"output.weight", {dim, vocab}, false});
  if (c.rope_freq_factors) global.push_back({"rope_freqs.weight", {c.rope_dim / 2}, true});
  if (c.rope_long_short_factors) {
    global.push_back({"rope_factors_long.weight", {c.rope_dim / 2}, true});
    global.push_back({"rope_factors_short.weight", {c.rope_dim / 2}, true});
  }
  for (const Expected& e : global) {
    if (auto s = expect_tensor(f, e); !s) return s;
  }
  for (int32_t layer = 0; layer < c.n_layers; ++layer) {
    for (const Expected& e : layer_tensors(c, "blk." + std::to_string(layer) + ".")) {
      if (auto s = expect_tensor(f, e); !s) return s;
    }
  }
  return {};
}

}  // namespace cutline::model
