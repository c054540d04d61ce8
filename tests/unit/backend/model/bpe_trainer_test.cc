#include "cutline/model/bpe_trainer.h"

#include <gtest/gtest.h>

namespace cutline::model {
namespace {

TEST(BpeTrainer, ByteMappingIsGpt2s) {
  EXPECT_EQ(byte_to_unicode('a'), "a");
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");   // U+0120 "Ġ"
  EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // U+010A "Ċ"
  EXPECT_EQ(byte_to_unicode(0xFF), "\xC3\xBF");  // printable Latin-1 maps to itself
  std::string out;
  for (int b = 0; b < 256; ++b) out += byte_to_unicode(static_cast<uint8_t>(b));
  std::string back;
  ASSERT_TRUE(unicode_to_bytes(out, back));
  ASSERT_EQ(back.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(static_cast<uint8_t>(back[b]), b);
  EXPECT_FALSE(unicode_to_bytes("\xE4\xB8\x96", back));  // not a mapped byte
}

TEST(BpeTrainer, LearnsTheMostFrequentPairsFirstDeterministically) {
  BpeVocabulary v = train_bpe("low low low lower lowest", 3, PreTokenizer::kGpt2);
  ASSERT_EQ(v.tokens.size(), 259u);
  ASSERT_EQ(v.merges.size(), 3u);
  // "lo" and "ow" both occur 5 times; the tie goes to the smaller ids ('l' < 'o').
  EXPECT_EQ(v.merges[0], "l o");
  EXPECT_EQ(v.merges[1], "lo w");
  EXPECT_EQ(v.merges[2], "Ġ low");
  EXPECT_EQ(v.tokens[258], "Ġlow");
  BpeVocabulary again = train_bpe("low low low lower lowest", 3, PreTokenizer::kGpt2);
  EXPECT_EQ(again.merges, v.merges);
}

TEST(BpeTrainer, StopsWhenNoPairRepeats) {
  BpeVocabulary v = train_bpe("abcd", 100, PreTokenizer::kGpt2);
  EXPECT_TRUE(v.merges.empty());
  EXPECT_EQ(v.tokens.size(), 256u);
}

}  // namespace
}  // namespace cutline::model
