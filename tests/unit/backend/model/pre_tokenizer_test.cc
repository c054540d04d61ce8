#include "cutline/model/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <random>

namespace cutline::model {
namespace {

std::vector<std::string> split(PreTokenizer kind, std::string_view text) {
  std::vector<std::string_view> chunks;
  pre_tokenize(kind, text, chunks);
  return {chunks.begin(), chunks.end()};
}

using V = std::vector<std::string>;

TEST(PreTokenizer, Gpt2SplitsLikeItsRegex) {
  EXPECT_EQ(split(PreTokenizer::kGpt2, "Hello world's 123 test!!  \n\nok"),
            (V{"Hello", " world", "'s", " 123", " test", "!!", "  \n", "\n", "ok"}));
  EXPECT_EQ(split(PreTokenizer::kGpt2, "DON'T a  b "), (V{"DON", "'", "T", " a", " ", " b", " "}));
  EXPECT_EQ(split(PreTokenizer::kGpt2, "Привет мир, 世界！"),
            (V{"Привет", " мир", ",", " 世界", "！"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsInThreesAndKeepsNewlinesTogether) {
  EXPECT_EQ(split(PreTokenizer::kLlama3, "Hello world's 12345 test!!  \n\nok\tgo"),
            (V{"Hello", " world", "'s", " ", "123", "45", " test", "!!", "  \n\n", "ok", "\tgo"}));
  EXPECT_EQ(split(PreTokenizer::kLlama3, "DON'T stop.\nNext"),
            (V{"DON", "'T", " stop", ".\n", "Next"}));
  EXPECT_EQ(split(PreTokenizer::kLlama3, "a  b   "), (V{"a", " ", " b", "   "}));
  EXPECT_EQ(split(PreTokenizer::kLlama3, "(x)"), (V{"(x", ")"}));
}

TEST(PreTokenizer, Qwen2SplitsDigitsOneByOne) {
  EXPECT_EQ(split(PreTokenizer::kQwen2, "v12345 ok"), (V{"v", "1", "2", "3", "4", "5", " ok"}));
}

TEST(PreTokenizer, NamesMapToPatterns) {
  EXPECT_EQ(pre_tokenizer_from_name("llama-bpe"), PreTokenizer::kLlama3);
  EXPECT_EQ(pre_tokenizer_from_name("smollm"), PreTokenizer::kLlama3);
  EXPECT_EQ(pre_tokenizer_from_name("qwen2"), PreTokenizer::kQwen2);
  EXPECT_EQ(pre_tokenizer_from_name("default"), PreTokenizer::kGpt2);
  EXPECT_EQ(pre_tokenizer_from_name("something-new"), PreTokenizer::kGpt2);
}

TEST(PreTokenizer, ChunksAlwaysConcatenateBackToAnyInput) {
  std::mt19937 rng(7);  // raw mt19937 output is fixed by the standard
  const std::string alphabet[] = {"a", "Z",    " ",        "  ",       "\n", "\r\n",  "\t",
                                  "1", "'",    "'s",       "!",        "é",  "ж",     "世",
                                  "🚀", "\xff", "\xe2\x82", "\xc0\x80", ".",  "\u00a0"};
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % std::size(alphabet)];
    for (PreTokenizer kind : {PreTokenizer::kGpt2, PreTokenizer::kLlama3, PreTokenizer::kQwen2}) {
      std::string joined;
      for (const std::string& c : split(kind, text)) {
        ASSERT_FALSE(c.empty());
        joined += c;
      }
      ASSERT_EQ(joined, text);
    }
  }
}

}  // namespace
}  // namespace cutline::model
