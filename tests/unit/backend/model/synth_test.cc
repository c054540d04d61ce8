#include "cutline/model/synth.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "cutline/model/chat_template.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/model_config.h"
#include "cutline/model/tokenizer_loader.h"
#include "support/unique_temp_path.h"

namespace cutline::model {
namespace {

float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  int exp = (h >> 10) & 31, mant = h & 1023;
  float v = exp == 0 ? std::ldexp(static_cast<float>(mant), -24)
                     : std::ldexp(static_cast<float>(mant + 1024), exp - 25);
  return (h & 0x8000) ? -v : v;
}

std::string temp_path(const std::string& name) { return test::unique_temp_path(name); }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Synth, DefaultModelLoadsThroughTheOrdinaryReader) {
  std::string path = temp_path("synth_default.gguf");
  ASSERT_TRUE(synthesize_tiny_model(SynthOptions{}, path).ok());
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto config = load_model_config(**file);
  ASSERT_TRUE(config.ok()) << config.error().message;
  EXPECT_EQ(config->architecture, "llama");
  EXPECT_EQ(config->name, "cutline-tiny");
  EXPECT_EQ(config->n_layers, 2);
  EXPECT_EQ(config->dim, 64);
  EXPECT_EQ(config->n_heads, 4);
  EXPECT_EQ(config->n_kv_heads, 2);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_EQ(config->ffn_dim, 192);
  EXPECT_EQ(config->vocab_size, 512);
  EXPECT_EQ(config->context_length, 2048);
  EXPECT_FALSE(config->tied_output);
  EXPECT_FALSE(config->qkv_bias);
  EXPECT_EQ(config->rope_style, RopeStyle::kInterleaved);
  EXPECT_EQ((*file)->tensor("blk.0.attn_q.weight")->type, TensorType::kF16);
  EXPECT_EQ((*file)->tensor("blk.1.ffn_norm.weight")->type, TensorType::kF32);

  auto tok = load_tokenizer(**file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->vocab_size(), 512);
  EXPECT_EQ((*tok)->bos_id(), (*tok)->special_token_id("<|begin_of_text|>"));
  EXPECT_TRUE((*tok)->is_eos((*tok)->special_token_id("<|end_of_text|>")));
  EXPECT_TRUE((*tok)->is_eos((*tok)->special_token_id("<|im_end|>")));
  EXPECT_TRUE((*tok)->is_control((*tok)->special_token_id("<|im_start|>")));
  std::string text = "The quick brown fox jumps over the lazy dog. Привет, 世界! 🚀";
  auto ids = (*tok)->encode(text, true);
  EXPECT_EQ(ids.front(), (*tok)->bos_id());
  EXPECT_EQ((*tok)->decode(ids), text);
  // Learned merges compress English the vocabulary was trained on.
  std::string english = "The quick brown fox jumps over the lazy dog.";
  EXPECT_LT((*tok)->encode(english, false).size(), english.size() * 2 / 3);

  auto chat = (*file)->get_string("tokenizer.chat_template");
  ASSERT_TRUE(chat.ok());
  DetectedChatTemplate detected = detect_chat_template(*chat);
  EXPECT_EQ(detected.kind, ChatTemplateKind::kChatMl);
  EXPECT_TRUE(detected.warning.empty());
}

TEST(Synth, SameOptionsGiveIdenticalBytesAndTheSeedChangesOnlyWeights) {
  SynthOptions o;
  o.layers = 1;
  ASSERT_TRUE(synthesize_tiny_model(o, temp_path("synth_a.gguf")).ok());
  ASSERT_TRUE(synthesize_tiny_model(o, temp_path("synth_b.gguf")).ok());
  o.seed = 2;
  ASSERT_TRUE(synthesize_tiny_model(o, temp_path("synth_c.gguf")).ok());
  std::string a = read_all(temp_path("synth_a.gguf"));
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, read_all(temp_path("synth_b.gguf")));
  auto fa = GgufFile::open(temp_path("synth_a.gguf"));
  auto fc = GgufFile::open(temp_path("synth_c.gguf"));
  ASSERT_TRUE(fa.ok() && fc.ok());
  const GgufTensor* ea = (*fa)->tensor("token_embd.weight");
  const GgufTensor* ec = (*fc)->tensor("token_embd.weight");
  EXPECT_NE(std::memcmp(ea->data, ec->data, static_cast<size_t>(ea->n_bytes)), 0);
  auto ta = (*fa)->get_string_array("tokenizer.ggml.tokens");
  auto tc = (*fc)->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(ta.ok() && tc.ok());
  EXPECT_TRUE(std::equal(ta->begin(), ta->end(), tc->begin(), tc->end()));
}

TEST(Synth, WeightsHaveTheirIntendedScaleAndLogitsSpread) {
  std::string path = temp_path("synth_scale.gguf");
  ASSERT_TRUE(synthesize_tiny_model(SynthOptions{}, path).ok());
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  const GgufTensor* embd = (*file)->tensor("token_embd.weight");
  const GgufTensor* out = (*file)->tensor("output.weight");
  const GgufTensor* norm = (*file)->tensor("output_norm.weight");
  const int64_t dim = embd->shape[0], vocab = embd->shape[1];
  double sum2 = 0;
  for (int64_t i = 0; i < dim * vocab; ++i) {
    float v = f16(embd->data + 2 * i);
    ASSERT_LE(std::fabs(v), 1.0f);
    sum2 += v * v;
  }
  EXPECT_NEAR(std::sqrt(sum2 / static_cast<double>(dim * vocab)), 1 / std::sqrt(3.0), 0.02);
  float g[64];
  std::memcpy(g, norm->data, sizeof g);
  for (float v : g) EXPECT_NEAR(v, 1.0f, 0.1001f);

  // Logits of a normalized embedding row through the output matrix: spread over several units,
  // so a random model samples varied tokens rather than a uniform or one-hot distribution.
  std::vector<float> x(dim);
  double ms = 0;
  for (int64_t i = 0; i < dim; ++i) {
    x[i] = f16(embd->data + 2 * (5 * dim + i));
    ms += x[i] * x[i];
  }
  for (int64_t i = 0; i < dim; ++i) x[i] = x[i] / std::sqrt(ms / dim) * g[i];
  double mean = 0, var = 0;
  std::vector<double> logits(vocab);
  for (int64_t r = 0; r < vocab; ++r) {
    for (int64_t i = 0; i < dim; ++i) logits[r] += x[i] * f16(out->data + 2 * (r * dim + i));
    mean += logits[r] / vocab;
  }
  for (double l : logits) var += (l - mean) * (l - mean) / vocab;
  EXPECT_GT(std::sqrt(var), 1.0);
  EXPECT_LT(std::sqrt(var), 10.0);
}

TEST(Synth, QuantizedTypesWriteBlocksOfTheRightSize) {
  for (TensorType t : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0,
                       TensorType::kIQ4_NL, TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ5_K,
                       TensorType::kIQ4_XS}) {
    SCOPED_TRACE(tensor_type_name(t));
    SynthOptions o;
    o.type = t;
    o.tied_output = true;
    if (tensor_type_traits(t)->block_elems == 256) {
      o.dim = 256;
      o.ffn = 192 * 4;
    }
    std::string path = temp_path("synth_q.gguf");
    ASSERT_TRUE(synthesize_tiny_model(o, path).ok());
    auto file = GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto config = load_model_config(**file);
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_TRUE(config->tied_output);
    const GgufTensor* w = (*file)->tensor("blk.0.ffn_down.weight");
    EXPECT_EQ(w->type, t);
    EXPECT_EQ(w->n_bytes, tensor_row_bytes(t, synth_ffn_dim(o)) * o.dim);
    EXPECT_EQ((*file)->tensor("blk.0.attn_norm.weight")->type, TensorType::kF32);
    // Q8_0: every block's scale is amax / 127 of uniform draws, so positive and < 1/127 * max.
    if (t == TensorType::kQ8_0) {
      float d = f16(w->data);
      EXPECT_GT(d, 0.0f);
      EXPECT_LT(d, 0.01f);
    }
  }
}

TEST(Synth, InvalidOptionsNameTheOption) {
  auto message = [](SynthOptions o) {
    Status s = synthesize_tiny_model(o, temp_path("synth_bad.gguf"));
    return s.ok() ? std::string() : s.error().message;
  };
  SynthOptions o;
  o.heads = 3;
  EXPECT_EQ(message(o), "synth: --dim 64 is not a multiple of --heads 3");
  o = {};
  o.kv_heads = 3;
  EXPECT_EQ(message(o), "synth: --heads 4 is not a multiple of --kv-heads 3");
  o = {};
  o.vocab = 100;
  EXPECT_EQ(message(o),
            "synth: --vocab must be at least 260 (256 byte tokens and 4 special tokens)");
  o = {};
  o.type = TensorType::kQ4_0;
  o.ffn = 100;
  EXPECT_EQ(message(o), "synth: --ffn 100 is not a multiple of the q4_0 block size 32");
  o = {};
  o.type = TensorType::kQ6_K;  // 256-element blocks: --dim 64 is not whole blocks
  EXPECT_EQ(message(o), "synth: --dim 64 is not a multiple of the q6_K block size 256");
  o = {};
  o.type = TensorType::kIQ2_XXS;
  EXPECT_EQ(message(o),
            "synth: --type must be one of f32, f16, q4_0, q4_1, q5_0, q8_0, q2_K, q3_K, q4_K, "
            "q5_K, q6_K, iq4_nl, iq4_xs, bf16 (got iq2_xxs)");
}

TEST(Synth, LargeVocabulariesArePaddedWithReservedControlTokens) {
  SynthOptions o;
  o.layers = 1;
  o.vocab = 8192;  // more than the bundled text yields merges for
  std::string path = temp_path("synth_bigvocab.gguf");
  ASSERT_TRUE(synthesize_tiny_model(o, path).ok());
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.ok());
  auto tok = load_tokenizer(**file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->vocab_size(), 8192);
  int32_t reserved = (*tok)->special_token_id("<|reserved_special_token_0|>");
  ASSERT_GE(reserved, 0);
  EXPECT_TRUE((*tok)->is_control(reserved));
  EXPECT_EQ((*tok)->token_bytes(reserved), "");
  std::string text = "<|reserved_special_token_0|> and <|im_start|> stay text";
  EXPECT_EQ((*tok)->decode((*tok)->encode(text, false)), text);
  for (int32_t id : (*tok)->encode(text, false)) EXPECT_FALSE((*tok)->is_control(id));
}

TEST(Synth, BuiltinModelIsSynthesizedOnceIntoTheCache) {
  std::string dir = temp_path("synth_cache/nested");
  auto first = ensure_builtin_model(dir);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(*first, dir + "/cutline-tiny-v1.gguf");
  std::string bytes = read_all(*first);
  auto second = ensure_builtin_model(dir);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *first);
  EXPECT_EQ(read_all(*second), bytes);
  // No temporary files are left behind.
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  int entries = 0;
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++entries;
  }
  closedir(d);
  EXPECT_EQ(entries, 1);
  // A corrupt cached file is replaced.
  std::ofstream(*first, std::ios::binary | std::ios::trunc) << "junk";
  auto third = ensure_builtin_model(dir);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(read_all(*third), bytes);
}

TEST(Synth, UnwritablePathIsAnIoError) {
  Status s = synthesize_tiny_model(SynthOptions{}, "/nonexistent-dir/x.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kIo);
  EXPECT_NE(s.error().message.find("/nonexistent-dir/x.gguf: cannot create"), std::string::npos);
}

}  // namespace
}  // namespace cutline::model
