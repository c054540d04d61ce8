#include "cutline/model/tokenizer_loader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "cutline/model/bpe_trainer.h"
#include "cutline/model/gguf_writer.h"

namespace cutline::model {
namespace {

// A metadata-only file with a tokenizer; `edit` changes it before writing.
Result<std::unique_ptr<Tokenizer>> load(const std::function<void(GgufWriter&)>& edit,
                                        std::string* error = nullptr) {
  GgufWriter w;
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(byte_to_unicode(static_cast<uint8_t>(b)));
  tokens.push_back("ab");
  tokens.push_back("<|end|>");
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  std::vector<std::string> merges = {"a b"};
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.eos_token_id", 257);
  edit(w);
  EXPECT_TRUE(w.begin_memory().ok());
  EXPECT_TRUE(w.finish().ok());
  auto f = GgufFile::from_bytes(w.take_bytes(), "t.gguf");
  EXPECT_TRUE(f.ok());
  auto t = load_tokenizer(**f);
  if (!t.ok() && error) *error = t.error().message;
  return t;
}

std::string error_of(const std::function<void(GgufWriter&)>& edit) {
  std::string e;
  auto t = load(edit, &e);
  return t.ok() ? "" : e;
}

TEST(TokenizerLoader, BuildsABpeTokenizerFromMetadata) {
  auto t = load([](GgufWriter&) {});
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ((*t)->vocab_size(), 258);
  EXPECT_EQ((*t)->encode("ab", false), (std::vector<int32_t>{256}));
  EXPECT_TRUE((*t)->is_eos(257));
  EXPECT_TRUE((*t)->is_control(257));
  EXPECT_EQ((*t)->bos_id(), -1);
  EXPECT_EQ((*t)->encode("ab", true), (std::vector<int32_t>{256}));  // no BOS to add
}

TEST(TokenizerLoader, BuildsASentencePieceTokenizer) {
  auto t = load([](GgufWriter& w) {
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "▁hi", "▁", "h", "i", "▁h"};
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      tokens.emplace_back(name);
    }
    std::vector<int32_t> types(tokens.size(), 6);
    types[0] = 2;
    types[1] = types[2] = 3;
    for (int i = 3; i < 8; ++i) types[i] = 1;
    std::vector<float> scores(tokens.size(), 0.0f);
    scores[3] = -1;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_f32_array("tokenizer.ggml.scores", scores);
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  });
  ASSERT_TRUE(t.ok()) << t.error().message;
  // add_bos_token defaults to true for SentencePiece models.
  EXPECT_EQ((*t)->encode("hi", true), (std::vector<int32_t>{1, 3}));
  EXPECT_TRUE((*t)->is_eos(2));
}

TEST(TokenizerLoader, ErrorsNameTheKey) {
  EXPECT_EQ(error_of([](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "bert"); }),
            "t.gguf: tokenizer model 'bert' (metadata key 'tokenizer.ggml.model') is not "
            "supported (supported: gpt2, llama)");
  EXPECT_EQ(error_of([](GgufWriter& w) { w.set_u32("tokenizer.ggml.bos_token_id", 999); }),
            "t.gguf: metadata key 'tokenizer.ggml.bos_token_id' is 999, expected a token id "
            "below the vocabulary size 258");
  EXPECT_EQ(error_of([](GgufWriter& w) {
              std::vector<int32_t> types = {1, 1};
              w.set_i32_array("tokenizer.ggml.token_type", types);
            }),
            "t.gguf: metadata key 'tokenizer.ggml.token_type' has 2 entries, expected 258 (one "
            "per token)");
  EXPECT_EQ(error_of([](GgufWriter& w) { w.set_u32("tokenizer.ggml.merges", 1); }),
            "t.gguf: metadata key 'tokenizer.ggml.merges' has type uint32, expected an array of "
            "strings (required for gpt2 tokenizers)");
  EXPECT_EQ(error_of([](GgufWriter& w) {
              std::vector<std::string> merges = {"a z"};
              w.set_string_array("tokenizer.ggml.merges", merges);
            }),
            "t.gguf: bpe tokenizer: merge 0 'a z' names a token missing from the vocabulary");
}

}  // namespace
}  // namespace cutline::model
