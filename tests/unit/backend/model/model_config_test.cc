#include "cutline/model/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "cutline/model/gguf_writer.h"
#include "cutline/model/synth.h"
#include "support/unique_temp_path.h"

namespace cutline::model {
namespace {

// A tiny model file in memory: F32 weights of zeros, metadata and tensors adjustable.
struct Spec {
  std::string arch = "llama";
  int64_t layers = 2, dim = 32, heads = 4, kv_heads = 2, ffn = 48, vocab = 40;
  int64_t head_dim = 0;  // 0: dim / heads (set: also written as attention.key_length)
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
  if (s.head_dim > 0) {
    w.set_u32(p + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(p + "attention.value_length", static_cast<uint32_t>(s.head_dim));
  }
  if (s.arch == "gemma3") w.set_u32(p + "attention.sliding_window", 16);
  if (s.extra_metadata) s.extra_metadata(w);
  const int64_t hd = s.head_dim > 0 ? s.head_dim : s.dim / s.heads, q = s.heads * hd,
                kv = s.kv_heads * hd;
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
    if (s.arch == "gemma2" || s.arch == "gemma3") {
      tensors.push_back({b + "post_attention_norm.weight", {s.dim}});
      tensors.push_back({b + "post_ffw_norm.weight", {s.dim}});
    }
    if (s.arch == "gemma3" || s.arch == "qwen3") {
      tensors.push_back({b + "attn_q_norm.weight", {hd}});
      tensors.push_back({b + "attn_k_norm.weight", {hd}});
    }
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
  // A factor without a type scales linearly (llama.cpp's default type); so does the old key.
  s.extra_metadata = [](GgufWriter& w) { w.set_f32("llama.rope.scaling.factor", 2.0f); };
  c = config_of(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope_scaling, RopeScaling::kLinear);
  EXPECT_FLOAT_EQ(c->rope_linear_scale, 2.0f);
  s.extra_metadata = [](GgufWriter& w) { w.set_f32("llama.rope.scale_linear", 3.0f); };
  EXPECT_FLOAT_EQ(config_of(s)->rope_linear_scale, 3.0f);
  s.extra_metadata = [](GgufWriter& w) {
    w.set_string("llama.rope.scaling.type", "yarn");
    w.set_f32("llama.rope.scaling.factor", 4.0f);
    w.set_u32("llama.rope.scaling.original_context_length", 64);
  };
  c = config_of(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->rope_scaling, RopeScaling::kYarn);
  EXPECT_FLOAT_EQ(c->yarn_factor, 4.0f);
  EXPECT_FLOAT_EQ(c->rope_linear_scale, 1.0f);  // the interpolation is in YaRN's ramp
  EXPECT_EQ(c->yarn_original_context, 64);
  s.extra_metadata = [](GgufWriter& w) { w.set_string("llama.rope.scaling.type", "dynamic"); };
  EXPECT_EQ(error_of(s),
            "m.gguf: RoPE scaling 'dynamic' (metadata key 'llama.rope.scaling.type') is not "
            "supported (supported: none, linear, yarn, longrope)");
}

TEST(ModelConfig, UnsupportedArchitecturesAreRefusedByName) {
  Spec s;
  s.arch = "mamba";
  auto c = config_of(s);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().kind, ErrorKind::kUnsupported);
  EXPECT_EQ(c.error().message,
            "m.gguf: architecture 'mamba' is not supported (supported: llama, qwen2, qwen3, phi3, "
            "gemma2, gemma3)");
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

// A head count x key length that wraps in 32 bits (4 x 1073741840 = 2^32 + 64) would pass a
// 32-bit shape check against 64-wide tensors and then run attention over 1073741840-wide heads:
// refused at load, naming both keys. tests/fuzz/corpus/model_gguf_fuzz/head_dim_wrap.gguf is this
// file.
TEST(ModelConfig, HeadCountTimesKeyLengthOverflowIsRefused) {
  Spec s;
  s.dim = 64;
  s.heads = 4;
  s.kv_heads = 4;
  s.extra_metadata = [](GgufWriter& w) {
    w.set_u32("llama.attention.key_length", 1073741840u);
    w.set_u32("llama.attention.value_length", 1073741840u);
    w.set_u32("llama.rope.dimension_count", 16);
  };
  EXPECT_EQ(error_of(s),
            "m.gguf: 'llama.attention.head_count' x 'llama.attention.key_length' is 4294967360, "
            "expected at most 16777216");
  s.extra_metadata = [](GgufWriter& w) { w.set_u32("llama.feed_forward_length", 1u << 31); };
  EXPECT_EQ(error_of(s),
            "m.gguf: metadata key 'llama.feed_forward_length' is 2147483648, expected a positive "
            "32-bit integer");
  s.extra_metadata = [](GgufWriter& w) { w.set_u32("llama.feed_forward_length", 1u << 30); };
  EXPECT_EQ(error_of(s),
            "m.gguf: metadata key 'llama.feed_forward_length' is 1073741824, expected at most "
            "16777216");
}

TEST(ModelConfig, MissingHyperParametersNameTheFileAndKey) {
  Spec s;
  s.arch = "qwen3";
  s.omit = {"blk.1.attn_k_norm.weight"};
  EXPECT_EQ(error_of(s),
            "m.gguf: tensor 'blk.1.attn_k_norm.weight' is missing (expected shape [8])");
  s = {};
  s.arch = "gemma3";
  s.extra_metadata = [](GgufWriter& w) { w.set_u32("gemma3.attention.sliding_window", 0); };
  EXPECT_EQ(error_of(s), "");  // 0 = no window is allowed
  s.omit = {"blk.0.post_ffw_norm.weight"};
  EXPECT_EQ(error_of(s),
            "m.gguf: tensor 'blk.0.post_ffw_norm.weight' is missing (expected shape [32])");
  s = {};
  s.arch = "phi3";  // separate q/k/v are accepted; the gate must be fused into ffn_up
  s.omit = {"blk.0.ffn_gate.weight", "blk.1.ffn_gate.weight"};
  EXPECT_EQ(error_of(s),
            "m.gguf: tensor 'blk.0.ffn_up.weight' has shape [32, 48], expected [32, 96]");
  s = {};
  s.extra_metadata = [](GgufWriter& w) { w.set_u32("llama.block_count", 0); };
  EXPECT_EQ(error_of(s),
            "m.gguf: metadata key 'llama.block_count' is 0, expected a positive 32-bit integer");
}

// attention.sliding_window_pattern as a period or as one flag per layer; rope.freq_base_swa.
TEST(ModelConfig, SlidingWindowPatternAndLocalBase) {
  Spec s;
  s.layers = 3;
  s.extra_metadata = [](GgufWriter& w) {
    w.set_u32("llama.attention.sliding_window", 8);
    w.set_i32_array("llama.attention.sliding_window_pattern", std::vector<int32_t>{0, 1, 1});
    w.set_f32("llama.rope.freq_base_swa", 5000.0f);
  };
  auto c = config_of(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE(c->is_local_layer(0));
  EXPECT_TRUE(c->is_local_layer(1));
  EXPECT_TRUE(c->is_local_layer(2));
  EXPECT_FLOAT_EQ(c->rope_freq_base_local, 5000.0f);
  s.extra_metadata = [](GgufWriter& w) {
    w.set_u32("llama.attention.sliding_window", 8);
    w.set_i32_array("llama.attention.sliding_window_pattern", std::vector<int32_t>{0, 1});
  };
  EXPECT_EQ(error_of(s),
            "m.gguf: metadata key 'llama.attention.sliding_window_pattern' has 2 entries, expected "
            "one per layer (3)");
  s.extra_metadata = [](GgufWriter& w) {
    w.set_u32("llama.attention.sliding_window", 8);
    w.set_u32("llama.attention.sliding_window_pattern", 3);
  };
  c = config_of(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->is_local_layer(0) && c->is_local_layer(1) && !c->is_local_layer(2));
  EXPECT_FLOAT_EQ(c->rope_freq_base_local, c->rope_freq_base);
}

TEST(ModelConfig, MissingRequiredKeysAreNamed) {
  // A required key absent: the Spec always writes them, so drop one by writing the file by hand.
  GgufWriter w;
  w.set_string("general.architecture", "gemma3");
  w.set_u32("gemma3.block_count", 1);
  w.set_u32("gemma3.embedding_length", 32);
  w.set_u32("gemma3.attention.head_count", 4);
  w.set_u32("gemma3.feed_forward_length", 48);
  w.set_u32("gemma3.context_length", 64);
  ASSERT_TRUE(w.begin_memory().ok());
  ASSERT_TRUE(w.finish().ok());
  auto f = GgufFile::from_bytes(w.take_bytes(), "g.gguf");
  ASSERT_TRUE(f.ok());
  auto c = load_model_config(**f);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message,
            "g.gguf: metadata key 'gemma3.attention.sliding_window' is missing (required for "
            "gemma3)");
}

std::shared_ptr<const GgufFile> synth_file(const SynthOptions& o) {
  const std::string path = test::unique_temp_path("config_" + o.arch + ".gguf");
  EXPECT_TRUE(synthesize_tiny_model(o, path).ok());
  return std::shared_ptr<const GgufFile>(GgufFile::open(path).value());
}

TEST(ModelConfig, ArchitectureConventions) {
  SynthOptions o;
  o.layers = 6;
  o.dim = 64;
  o.heads = 4;
  o.kv_heads = 2;
  o.vocab = 300;
  o.context = 64;
  o.arch = "qwen3";
  ModelConfig c = load_model_config(*synth_file(o)).value();
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.rope_style, RopeStyle::kNeox);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_FALSE(c.is_local_layer(0));

  o.arch = "phi3";
  c = load_model_config(*synth_file(o)).value();
  EXPECT_TRUE(c.fused_qkv && c.fused_gate_up);
  EXPECT_EQ(c.ffn_activation, FfnActivation::kSilu);

  o.arch = "gemma2";
  c = load_model_config(*synth_file(o)).value();
  EXPECT_TRUE(c.post_norms && c.tied_output && !c.qk_norm);
  EXPECT_EQ(c.ffn_activation, FfnActivation::kGeluTanh);
  EXPECT_FLOAT_EQ(c.embedding_scale, 8.0f);
  EXPECT_FLOAT_EQ(c.attention_scale, 0.25f);  // 1 / sqrt(head size 16)
  EXPECT_FLOAT_EQ(c.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(c.sliding_window, 32);
  EXPECT_TRUE(c.is_local_layer(0));
  EXPECT_FALSE(c.is_local_layer(1));
  EXPECT_TRUE(c.is_local_layer(4));

  o.arch = "gemma3";
  c = load_model_config(*synth_file(o)).value();
  EXPECT_TRUE(c.post_norms && c.qk_norm);
  EXPECT_FLOAT_EQ(c.attn_softcap, 0.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 0.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_base, 1e6f);
  EXPECT_FLOAT_EQ(c.rope_freq_base_local, 1e4f);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(c.is_local_layer(i)) << i;
  EXPECT_FALSE(c.is_local_layer(5));
}

// Gemma's 27B models scale queries by 1/sqrt(dim / heads) instead of 1/sqrt(head size).
TEST(ModelConfig, Gemma27bQueryPreAttentionScalar) {
  Spec s;
  s.arch = "gemma2";
  s.layers = 46;
  s.dim = 64;
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 16;
  auto c = config_of(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FLOAT_EQ(c->attention_scale, 1.0f / std::sqrt(32.0f));  // dim / heads
  s.layers = 42;                                                 // 9B
  c = config_of(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FLOAT_EQ(c->attention_scale, 0.25f);  // 1 / sqrt(16)
}

}  // namespace
}  // namespace cutline::model
