#include "cutline/model/model_summary.h"

#include <gtest/gtest.h>

#include "cutline/model/gguf_writer.h"
#include "cutline/model/synth.h"
#include "support/unique_temp_path.h"

namespace cutline::model {
namespace {

TEST(ModelSummary, SynthesizedQwen3IsServableWithItsMemory) {
  SynthOptions o;
  o.arch = "qwen3";
  o.layers = 2;
  o.dim = 64;
  o.heads = 4;
  o.kv_heads = 2;
  o.vocab = 300;
  o.context = 256;
  o.type = TensorType::kQ8_0;
  const std::string path = test::unique_temp_path("summary_qwen3.gguf");
  ASSERT_TRUE(synthesize_tiny_model(o, path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok());
  const ModelSummary s = summarize_model(**f, 100);
  ASSERT_TRUE(s.config.has_value()) << s.config_error;
  EXPECT_EQ(s.architecture, "qwen3");
  EXPECT_TRUE(s.servable) << s.not_servable;
  EXPECT_EQ(s.context, 100);
  EXPECT_EQ(s.kv_bytes, 100 * 2 * 2 * 32 * 4);  // positions x K,V x layers x kv dim x f32
  EXPECT_EQ(s.weight_bytes, (*f)->tensor_bytes());
  int64_t params = 0;
  for (const GgufTensor& t : (*f)->tensors()) params += t.n_elements;
  EXPECT_EQ(s.parameters, params);
  ASSERT_EQ(s.types.size(), 2u);  // q8_0 matrices, f32 norms
  EXPECT_EQ(s.types[0].type, "q8_0");
  EXPECT_GT(s.types[0].share, 0.9);
  EXPECT_NEAR(s.types[0].share + s.types[1].share, 1.0, 1e-9);
  EXPECT_EQ(s.tokenizer_model, "gpt2");

  // A context beyond the model's 256: not "serve: yes", and the report says why.
  const ModelSummary beyond = summarize_model(**f, 1024);
  EXPECT_FALSE(beyond.servable);
  EXPECT_NE(render_model_summary(beyond).find(
                "serve: no: context 1024 is beyond the model's context length 256"),
            std::string::npos)
      << render_model_summary(beyond);
  EXPECT_EQ(s.tokenizer_tokens, 300);
  EXPECT_TRUE(s.chat_template_present);
  EXPECT_EQ(s.chat_template, "chatml");
  const std::string text = render_model_summary(s);
  EXPECT_NE(text.find("model: qwen3 'cutline-tiny': 2 layers"), std::string::npos) << text;
  EXPECT_NE(text.find("tokenizer: 300 tokens"), std::string::npos) << text;
  EXPECT_NE(text.find("gpt2 (byte-level BPE)"), std::string::npos) << text;
  EXPECT_NE(text.find("weight types: q8_0 "), std::string::npos) << text;
  EXPECT_NE(text.find("serve: yes, memory at context 100: weights "), std::string::npos) << text;
}

// Every reason a file cannot be served is named: here the architecture and the tokenizer.
TEST(ModelSummary, UnservableFileSaysWhy) {
  GgufWriter w;
  w.set_string("general.architecture", "mamba");
  ASSERT_TRUE(w.add_tensor("a.weight", TensorType::kF32, {8}).ok());
  ASSERT_TRUE(w.begin_memory().ok());
  ASSERT_TRUE(w.write_data(std::vector<uint8_t>(32, 0)).ok());
  ASSERT_TRUE(w.finish().ok());
  auto f = GgufFile::from_bytes(w.take_bytes(), "m.gguf");
  ASSERT_TRUE(f.ok()) << f.error().message;
  const ModelSummary s = summarize_model(**f);
  EXPECT_FALSE(s.servable);
  EXPECT_FALSE(s.config.has_value());
  EXPECT_NE(s.not_servable.find("architecture 'mamba' is not supported"), std::string::npos)
      << s.not_servable;
  EXPECT_FALSE(s.tokenizer_error.empty());
  EXPECT_NE(s.not_servable.find("; " + s.tokenizer_error), std::string::npos) << s.not_servable;
  EXPECT_FALSE(s.chat_template_present);
  const std::string text = render_model_summary(s);
  EXPECT_NE(text.find("serve: no: m.gguf: architecture 'mamba'"), std::string::npos) << text;
  EXPECT_NE(text.find("chat template: chatml (none in the file)"), std::string::npos) << text;
}

}  // namespace
}  // namespace cutline::model
