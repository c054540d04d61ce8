// Every architecture on a synthesized model (`cutline model synth --arch`) against the plain-loop
// reference of reference_forward.h: a prompt longer than the sliding window prefilled in one
// chunk, then decoded token by token, with the logits of every step within 1e-5 of the
// reference's largest logit. Also the RoPE scalings (Llama 3.1 frequency factors, linear, YaRN,
// phi3 long RoPE) and gemma2's soft-caps.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cutline/model/llama_runner.h"
#include "cutline/model/synth.h"
#include "reference_forward.h"
#include "support/unique_temp_path.h"

namespace cutline::model {
namespace {

// Max-abs error over the largest |logit| of the reference. The runner accumulates in float
// (in another order than the reference's double loops): the worst seen here is 1.7e-6 (AVX-512
// kernels), so 1e-5 leaves room for other instruction sets and still catches any convention
// error (a wrong RoPE pairing, base, window or norm is > 1e-2).
constexpr double kTolerance = 1e-5;
constexpr int32_t kWindow = 6;

std::shared_ptr<device::Device> cpu() {
  return std::shared_ptr<device::Device>(
      device::make_device({.kind = device::DeviceKind::kCpu, .cpu_threads = 2, .cpu_isa = ""})
          .value());
}

SynthOptions tiny(const std::string& arch) {
  SynthOptions o;
  o.arch = arch;
  o.layers = arch == "gemma3" ? 6 : 2;  // gemma3: 5 local layers, then a global one
  o.dim = 64;
  o.heads = 4;
  o.kv_heads = 2;
  o.vocab = 300;
  o.context = 64;
  o.sliding_window = kWindow;
  o.name = "tiny-" + arch;
  return o;
}

std::shared_ptr<const GgufFile> synth(const SynthOptions& o, const std::string& tag) {
  const std::string path = test::unique_temp_path("arch_" + tag + ".gguf");
  auto s = synthesize_tiny_model(o, path);
  EXPECT_TRUE(s.ok()) << s.error().message;
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << f.error().message;
  return std::shared_ptr<const GgufFile>(std::move(f).value());
}

const std::vector<int32_t> kTokens = {1, 17, 250, 3, 99, 42,  7,   7,  180, 64,
                                      5, 11, 290, 2, 77, 123, 200, 45, 9,   31};
const std::vector<int32_t> kTable = {9, 2, 14, 0, 6, 11, 3, 13};  // scattered blocks of 4

// Prefills the first `prefill` tokens in one step, then decodes the rest one at a time; returns
// the worst relative error over every step's logits.
double worst_error(std::shared_ptr<const GgufFile> file, size_t prefill) {
  auto runner = LlamaRunner::load(file, cpu());
  EXPECT_TRUE(runner.ok()) << runner.error().message;
  if (!runner.ok()) return 1e9;
  EXPECT_TRUE((*runner)->allocate_kv(16, 4).ok());
  const auto ref = reference::forward(reference::load(*file), kTokens);
  double worst = 0;
  const std::span<const int32_t> all(kTokens);
  for (size_t begin = 0; begin < kTokens.size();) {
    const size_t len = begin == 0 ? prefill : 1;
    ForwardBatch b;
    b.steps.push_back({.seq_id = 1,
                       .tokens = all.subspan(begin, len),
                       .start_pos = static_cast<int32_t>(begin),
                       .block_table = kTable,
                       .want_logits = true});
    std::vector<float> logits;
    auto s = (*runner)->forward(b, logits);
    EXPECT_TRUE(s.ok()) << s.error().message;
    if (!s.ok()) return 1e9;
    begin += len;
    worst = std::max(worst, reference::rel_error(logits.data(), ref[begin - 1]));
  }
  return worst;
}

class Architecture : public ::testing::TestWithParam<std::string> {};

TEST_P(Architecture, MatchesReferencePastTheSlidingWindow) {
  auto file = synth(tiny(GetParam()), GetParam());
  const ModelConfig c = load_model_config(*file).value();
  EXPECT_EQ(c.architecture, GetParam());
  EXPECT_EQ(c.sliding_window, kWindow);
  EXPECT_LT(worst_error(file, 12), kTolerance);
  EXPECT_LT(worst_error(file, 1), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Models, Architecture,
                         ::testing::Values("llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"),
                         [](const auto& info) { return info.param; });

// The window changes the answer once the sequence is longer than it (so the tests above would
// catch a runner that ignored it).
TEST(Architectures, SlidingWindowChangesLogitsPastTheWindow) {
  SynthOptions with = tiny("llama"), without = tiny("llama");
  without.sliding_window = 0;
  const auto a = reference::forward(reference::load(*synth(with, "win")), kTokens);
  const auto b = reference::forward(reference::load(*synth(without, "nowin")), kTokens);
  EXPECT_EQ(a[kWindow - 1], b[kWindow - 1]);
  EXPECT_GT(
      reference::rel_error(std::vector<float>(a.back().begin(), a.back().end()).data(), b.back()),
      1e-3);
}

TEST(Architectures, RopeScalingsMatchReference) {
  struct Case {
    std::string tag;
    SynthOptions o;
  };
  std::vector<Case> cases;
  cases.push_back({"llama31", tiny("llama")});
  cases.back().o.rope_freq_factors = true;
  cases.push_back({"linear", tiny("qwen3")});
  cases.back().o.rope_scaling = "linear";
  cases.back().o.rope_factor = 4.0f;
  cases.push_back({"yarn", tiny("qwen2")});
  cases.back().o.rope_scaling = "yarn";
  cases.back().o.rope_factor = 4.0f;
  cases.back().o.rope_original_context = 16;
  cases.push_back({"longrope", tiny("phi3")});
  cases.back().o.long_rope = true;
  cases.push_back({"gemma3-linear", tiny("gemma3")});
  cases.back().o.rope_scaling = "linear";
  cases.back().o.rope_factor = 8.0f;
  for (const Case& k : cases) {
    auto file = synth(k.o, k.tag);
    const ModelConfig c = load_model_config(*file).value();
    EXPECT_TRUE(c.rope_scaling != RopeScaling::kNone || c.rope_freq_factors ||
                c.rope_long_short_factors)
        << k.tag;
    EXPECT_LT(worst_error(file, 12), kTolerance) << k.tag;
  }
}

TEST(Architectures, Gemma2SoftCapsBindTheLogits) {
  SynthOptions o = tiny("gemma2");
  o.attn_softcap = 2.0f;
  o.final_softcap = 3.0f;
  auto file = synth(o, "gemma2-caps");
  const ModelConfig c = load_model_config(*file).value();
  EXPECT_FLOAT_EQ(c.attn_softcap, 2.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 3.0f);
  EXPECT_LT(worst_error(file, 12), kTolerance);
  auto runner = LlamaRunner::load(file, cpu()).value();
  ASSERT_TRUE(runner->allocate_kv(16, 4).ok());
  ForwardBatch b;
  b.steps.push_back(
      {.seq_id = 1, .tokens = kTokens, .start_pos = 0, .block_table = kTable, .want_logits = true});
  std::vector<float> logits;
  ASSERT_TRUE(runner->forward(b, logits).ok());
  float max_abs = 0;
  for (float v : logits) max_abs = std::max(max_abs, std::fabs(v));
  EXPECT_LE(max_abs, 3.0f);  // tanh saturates to the cap in float
  EXPECT_GT(max_abs, 1.0f);
}

// A sequence's logits are bitwise the same alone and beside another sequence, on an architecture
// whose attention runs on the host (gemma2: soft-cap, sliding window).
TEST(Architectures, HostAttentionIsBatchInvariant) {
  auto file = synth(tiny("gemma2"), "gemma2-inv");
  auto runner = LlamaRunner::load(file, cpu()).value();
  ASSERT_TRUE(runner->allocate_kv(24, 4).ok());
  const std::vector<int32_t> other = {5, 6, 7, 8, 9, 10, 11}, other_table = {20, 21};
  std::vector<float> alone, batched;
  ForwardBatch a;
  a.steps.push_back(
      {.seq_id = 1, .tokens = kTokens, .start_pos = 0, .block_table = kTable, .want_logits = true});
  ASSERT_TRUE(runner->forward(a, alone).ok());
  ForwardBatch b;
  b.steps.push_back({.seq_id = 2,
                     .tokens = other,
                     .start_pos = 0,
                     .block_table = other_table,
                     .want_logits = true});
  b.steps.push_back(
      {.seq_id = 1, .tokens = kTokens, .start_pos = 0, .block_table = kTable, .want_logits = true});
  ASSERT_TRUE(runner->forward(b, batched).ok());
  const size_t v = runner->info().vocab_size;
  ASSERT_EQ(batched.size(), 2 * v);
  EXPECT_EQ(0, std::memcmp(alone.data(), batched.data() + v, v * 4));
}

}  // namespace
}  // namespace cutline::model
