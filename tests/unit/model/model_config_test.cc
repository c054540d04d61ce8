#include "cutline/model/model_config.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "cutline/model/gguf_writer.h"

namespace cutline::model {
namespace {

// A tiny model file in memory: F32 weights of zeros, metadata and tensors adjustable.
struct Spec {
  std::string arch = "llama";
  int64_t layers = 2, dim = 32, heads = 4, kv_heads = 2, ffn = 48, vocab = 40;
  bool bias = false;
  bool tied = false;
  std::map<std::string, std::vector<int64_t>> shape_overrides;
  std::vector<std::string> omit;
  std::function<void(GgufWriter&)> extra_metadata;
  TensorType norm_type = TensorType::kF32;
};

std::vector<uint8_t> build(const Spec& s) {
  GgufWriter w;
  const std::string p = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", "test");
  w.set_u32(p + "block_count", static_cast<uint32_t>(s.layers));
  w.set_u32(p + "embedding_length", static_cast<uint32_t>(s.dim));
  w.set_u32(p + "attention.head_count", static_cast<uint32_t>(s.heads));
  w.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  w.set_u32(p + "feed_forward_length", static_cast<uint32_t>(s.ffn));
  w.set_u32(p + "context_length", 256);
  w.set_f32(p + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_f32(p + "rope.freq_base", 1000000.0f);
  if (s.extra_metadata) s.extra_metadata(w);
  const int64_t hd = s.dim / s.heads, q = s.dim, kv = s.kv_heads * hd;
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {
      {"token_embd.weight", {s.dim, s.vocab}}, {"output_norm.weight", {s.dim}}};
  if (!s.tied) tensors.push_back({"output.weight", {s.dim, s.vocab}});
  for (int64_t l = 0; l < s.layers; ++l) {
    std::string b = "blk." + std::to_string(l) + ".";
    tensors.push_back({b + "attn_norm.weight", {s.dim}});
    tensors.push_back({b + "attn_q.weight", {s.dim, q}});
    tensors.push_back({b + "attn_k.weight", {s.dim, kv}});
    tensors.push_back({b + "attn_v.weight", {s.dim, kv}});
    tensors.push_back({b + "attn_output.weight", {q, s.dim}});
    tensors.push_back({b + "ffn_norm.weight", {s.dim}});
    tensors.push_back({b + "ffn_gate.weight", {s.dim, s.ffn}});
    tensors.push_back({b + "ffn_up.weight", {s.dim, s.ffn}});
    tensors.push_back({b + "ffn_down.weight", {s.ffn, s.dim}});
    if (s.bias) {
      tensors.push_back({b + "attn_q.bias", {q}});
      tensors.push_back({b + "attn_k.bias", {kv}});
      tensors.push_back({b + "attn_v.bias", {kv}});
    }
  }
  int64_t total = 0;
  for (auto& [name, shape] : tensors) {
    if (std::find(s.omit.begin(), s.omit.end(), name) != s.omit.end()) continue;
    if (auto it = s.shape_overrides.find(name); it != s.shape_overrides.end()) shape = it->second;
    TensorType type = shape.size() == 1 && name.find("norm") != std::string::npos
                          ? s.norm_type
                          : TensorType::kF32;
    EXPECT_TRUE(w.add_tensor(name, type, shape).ok()) << name;
    total += w.tensor_bytes(w.tensor_count() - 1);
  }
  EXPECT_TRUE(w.begin_memory().ok());
  std::vector<uint8_t> zeros(static_cast<size_t>(total));
  EXPECT_TRUE(w.write_data(zeros).ok());
  EXPECT_TRUE(w.finish().ok());
  return w.take_bytes();
}

Result<ModelConfig> config_of(const Spec& s) {
  auto f = GgufFile::from_bytes(build(s), "m.gguf");
  if (!f) return f.error();
  return load_model_config(**f);
}

std::string error_of(const Spec& s) {
  auto c = config_of(s);
  return c.ok() ? "" : c.error().message;
}

TEST(ModelConfig, LlamaWithGqa) {
  auto c = config_of(Spec{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->n_layers, 2);
  EXPECT_EQ(c->dim, 32);
  EXPECT_EQ(c->n_heads, 4);
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->kv_dim(), 16);
  EXPECT_EQ(c->ffn_dim, 48);
  EXPECT_EQ(c->vocab_size, 40);
  EXPECT_EQ(c->context_length, 256);
  EXPECT_EQ(c->rope_dim, 8);
  EXPECT_FLOAT_EQ(c->rope_freq_base, 1e6f);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c->rope_linear_scale, 1.0f);
  EXPECT_EQ(c->rope_style, RopeStyle::kInterleaved);
  EXPECT_FALSE(c->tied_output);
  EXPECT_FALSE(c->qkv_bias);
}

TEST(ModelConfig, Qwen2WithBiasAndTiedOutput) {
  Spec s;
  s.arch = "qwen2";
  s.bias = true;
  s.tied = true;
  auto c = config_of(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_TRUE(c->tied_output);
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);
}

TEST(ModelConfig, LinearRopeScaling) {
  Spec s;
  s.extra_metadata = [](GgufWriter& w) {
    w.set_string("llama.rope.scaling.type", "linear");
    w.set_f32("llama.rope.scaling.factor", 4.0f);
  };
  auto c = config_of(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FLOAT_EQ(c->rope_linear_scale, 4.0f);
  s.extra_metadata = [](GgufWriter& w) { w.set_string("llama.rope.scaling.type", "yarn"); };
  EXPECT_EQ(error_of(s),
            "m.gguf: RoPE scaling 'yarn' (metadata key 'llama.rope.scaling.type') is not supported "
            "(supported: none, linear)");
}

TEST(ModelConfig, UnsupportedArchitecturesAreRefusedByName) {
  Spec s;
  s.arch = "mamba";
  auto c = config_of(s);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().kind, ErrorKind::kUnsupported);
  EXPECT_EQ(c.error().message,
            "m.gguf: architecture 'mamba' is not supported (supported: llama, qwen2)");
  s = {};
  s.extra_metadata = [](GgufWriter& w) { w.set_u32("llama.expert_count", 8); };
  EXPECT_EQ(error_of(s),
            "m.gguf: mixture-of-experts models are not supported (metadata key "
            "'llama.expert_count' is 8)");
}

TEST(ModelConfig, WrongShapesNameTheTensor) {
  Spec s;
  s.shape_overrides["blk.1.attn_k.weight"] = {32, 32};
  EXPECT_EQ(error_of(s),
            "m.gguf: tensor 'blk.1.attn_k.weight' has shape [32, 32], expected [32, 16]");
  s = {};
  s.omit = {"blk.0.ffn_up.weight"};
  EXPECT_EQ(error_of(s),
            "m.gguf: tensor 'blk.0.ffn_up.weight' is missing (expected shape [32, 48])");
  s = {};
  s.shape_overrides["token_embd.weight"] = {16, 40};
  EXPECT_EQ(error_of(s),
            "m.gguf: tensor 'token_embd.weight' has shape [16, 40], expected [32, <vocabulary "
            "size>]");
  s = {};
  s.arch = "qwen2";
  s.bias = true;
  s.omit = {"blk.1.attn_v.bias"};
  EXPECT_EQ(error_of(s), "m.gguf: tensor 'blk.1.attn_v.bias' is missing (expected shape [16])");
  s = {};
  s.norm_type = TensorType::kF16;
  EXPECT_EQ(error_of(s), "m.gguf: tensor 'output_norm.weight' has type f16, expected f32");
}

TEST(ModelConfig, InconsistentHyperParametersNameTheKey) {
  Spec s;
  s.kv_heads = 3;
  EXPECT_EQ(error_of(s),
            "m.gguf: metadata key 'llama.attention.head_count_kv' is 3, expected a divisor of the "
            "head count 4");
  s = {};
  s.extra_metadata = [](GgufWriter& w) { w.set_string("llama.block_count", "two"); };
  EXPECT_EQ(error_of(s),
            "m.gguf: metadata key 'llama.block_count' has type string, expected an integer");
  s = {};
  s.extra_metadata = [](GgufWriter& w) { w.set_i32("llama.context_length", -5); };
  EXPECT_EQ(error_of(s),
            "m.gguf: metadata key 'llama.context_length' is -5, expected a positive 32-bit "
            "integer");
}

}  // namespace
}  // namespace cutline::model
