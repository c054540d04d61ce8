// Token ids against a tokenizer written outside this repository: testdata/reference_ids_*.txt
// hold what llama.cpp's llama-tokenize gives for the multilingual corpus on the vocabulary
// `cutline model synth` writes (testdata/README.md says how they were made). Each pre-tokenizer
// the backend supports is checked on the same vocabulary and merges, and special-token text
// parsing is checked on prompts naming the model's control tokens.

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "cutline/model/bpe_tokenizer.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/special_tokens.h"
#include "cutline/model/synth.h"
#include "cutline/model/tokenizer_loader.h"
#include "support/unique_temp_path.h"

namespace cutline::model {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What make_reference_ids.py feeds llama-tokenize: each non-empty corpus line, then the whole
// corpus; for llama-bpe, then the special-token prompts (SPECIAL_SAMPLES there).
std::vector<std::string> samples() {
  const std::string corpus = read(CUTLINE_MODEL_TESTDATA "/multilingual_corpus.txt");
  std::vector<std::string> out;
  std::stringstream lines(corpus);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out.push_back(line);
  out.push_back(corpus);
  return out;
}
const char* kSpecialSamples[] = {
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|>text<|end_of_text|> <|im_end|>x<|im_start|>",
    "<|im_start<|im_start|>|>",
};

std::vector<std::vector<int32_t>> reference(const std::string& pre) {
  std::vector<std::vector<int32_t>> out;
  std::stringstream lines(read(CUTLINE_MODEL_TESTDATA "/reference_ids_" + pre + ".txt"));
  for (std::string line; std::getline(lines, line);) {
    std::vector<int32_t> ids;
    std::stringstream words(line);
    for (int32_t id; words >> id;) ids.push_back(id);
    out.push_back(std::move(ids));
  }
  return out;
}

class ReferenceIds : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // make_reference_ids.py's SYNTH_ARGS (the vocabulary depends on --vocab only).
    SynthOptions o;
    o.layers = 1;
    o.dim = 64;
    o.heads = 4;
    o.kv_heads = 2;
    o.vocab = 1024;
    o.context = 256;
    o.type = TensorType::kF16;
    const std::string path = test::unique_temp_path("reference_ids_test.gguf");
    ASSERT_TRUE(synthesize_tiny_model(o, path).ok());
    auto file = GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto vocab = load_vocabulary(**file);
    ASSERT_TRUE(vocab.ok()) << vocab.error().message;
    vocab_ = new Vocabulary(std::move(*vocab));
    auto merges = (*file)->get_string_array("tokenizer.ggml.merges");
    ASSERT_TRUE(merges.ok());
    merges_ = new std::vector<std::string>(merges->begin(), merges->end());
    std::filesystem::remove(path);
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete merges_;
  }

  static std::unique_ptr<BpeTokenizer> tokenizer(PreTokenizer pre) {
    std::vector<std::string_view> merges(merges_->begin(), merges_->end());
    auto t = BpeTokenizer::create(*vocab_, merges, pre);
    EXPECT_TRUE(t.ok());
    return std::move(t).value();
  }

  static void expect_reference(const std::string& pre_name, PreTokenizer pre) {
    auto tok = tokenizer(pre);
    auto want = reference(pre_name);
    std::vector<std::string> texts = samples();
    const bool special = pre_name == "llama-bpe";
    const size_t n = texts.size() + (special ? std::size(kSpecialSamples) : 0);
    ASSERT_EQ(want.size(), n) << "reference_ids_" << pre_name
                              << ".txt does not match the corpus; regenerate it (README.md)";
    size_t mismatches = 0;
    for (size_t i = 0; i < n; ++i) {
      const bool plain = i < texts.size();
      const std::string text = plain ? texts[i] : kSpecialSamples[i - texts.size()];
      std::vector<int32_t> got =
          plain ? tok->encode(text, false) : encode_with_special_tokens(*tok, text, false);
      if (got == want[i]) continue;
      size_t at = 0;
      while (at < got.size() && at < want[i].size() && got[at] == want[i][at]) ++at;
      ++mismatches;
      ADD_FAILURE() << pre_name << " sample " << i << " (" << text.substr(0, 40)
                    << "...): first difference at token " << at << " of " << want[i].size()
                    << ": llama.cpp " << (at < want[i].size() ? want[i][at] : -1) << ", ours "
                    << (at < got.size() ? got[at] : -1);
    }
    EXPECT_EQ(mismatches, 0u);
  }

  static Vocabulary* vocab_;
  static std::vector<std::string>* merges_;
};
Vocabulary* ReferenceIds::vocab_ = nullptr;
std::vector<std::string>* ReferenceIds::merges_ = nullptr;

TEST_F(ReferenceIds, Llama3PreTokenizerAndSpecialTokensMatchLlamaCpp) {
  expect_reference("llama-bpe", PreTokenizer::kLlama3);
}

TEST_F(ReferenceIds, Qwen2PreTokenizerMatchesLlamaCpp) {
  expect_reference("qwen2", PreTokenizer::kQwen2);
}

TEST_F(ReferenceIds, Gpt2PreTokenizerMatchesLlamaCpp) {
  expect_reference("gpt-2", PreTokenizer::kGpt2);
}

}  // namespace
}  // namespace cutline::model
