#include "cutline/model/spm_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

namespace cutline::model {
namespace {

// <unk>, <s>, </s>, 256 byte tokens, then scored pieces.
Vocabulary spm_vocab() {
  Vocabulary v;
  auto add = [&](std::string text, float score, TokenKind kind) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.kinds.push_back(kind);
  };
  add("<unk>", 0, TokenKind::kUnknown);
  add("<s>", 0, TokenKind::kControl);
  add("</s>", 0, TokenKind::kControl);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, 0, TokenKind::kByte);
  }
  const char* pieces[] = {"▁",  "▁h", "▁he", "ll",   "▁hell",  "▁hello", "h", "e", "l", "o",
                          "▁w", "or", "ld",  "▁wor", "▁world", "w",      "r", "d", "s", "<"};
  float score = -1;
  for (const char* p : pieces) add(p, score--, TokenKind::kNormal);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.eos_ids = {2};
  v.add_bos = true;
  return v;
}

std::vector<std::string> pieces(const Tokenizer& t, std::string_view text) {
  std::vector<std::string> out;
  for (int32_t id : t.encode(text, false)) out.emplace_back(t.token_bytes(id));
  return out;
}

using V = std::vector<std::string>;

TEST(SpmTokenizer, MergesByScoreWithASpacePrefix) {
  auto t = SpmTokenizer::create(spm_vocab(), true);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(pieces(**t, "hello world"), (V{" hello", " world"}));
  EXPECT_EQ((*t)->encode("hello", true).front(), 1);  // BOS
  EXPECT_EQ((*t)->decode((*t)->encode("hello world", false)), " hello world");
}

TEST(SpmTokenizer, UnknownCharactersFallBackToBytes) {
  auto t = SpmTokenizer::create(spm_vocab(), true);
  ASSERT_TRUE(t.ok());
  std::vector<int32_t> ids = (*t)->encode("hi ☃", false);
  // "▁h", then 'i' as <0x69>, "▁", then the three bytes of U+2603.
  ASSERT_EQ(ids.size(), 6u);
  EXPECT_EQ((*t)->token_bytes(ids[1]), "i");
  EXPECT_EQ(ids[1], 3 + 0x69);
  EXPECT_EQ(ids[3], 3 + 0xE2);
  EXPECT_EQ((*t)->decode(ids), " hi ☃");
}

TEST(SpmTokenizer, WithoutSpacePrefixRoundTripsExactly) {
  auto t = SpmTokenizer::create(spm_vocab(), false);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(pieces(**t, "hello world"), (V{"h", "e", "ll", "o", " world"}));
  EXPECT_EQ((*t)->decode((*t)->encode("hello world", false)), "hello world");
}

TEST(SpmTokenizer, ControlTokensAreNeverProducedFromText) {
  auto t = SpmTokenizer::create(spm_vocab(), true);
  ASSERT_TRUE(t.ok());
  for (int32_t id : (*t)->encode("<s></s><unk>", false)) {
    EXPECT_FALSE((*t)->is_control(id));
    EXPECT_NE(id, 0);
  }
  EXPECT_EQ((*t)->special_token_id("</s>"), 2);
  EXPECT_TRUE((*t)->is_eos(2));
  EXPECT_EQ((*t)->token_bytes(1), "");
}

TEST(SpmTokenizer, RoundTripsRandomText) {
  auto t = SpmTokenizer::create(spm_vocab(), true);
  ASSERT_TRUE(t.ok());
  std::mt19937 rng(9);
  const std::string alphabet[] = {"h", "e", "l",  "o", " ",  "w", "r", "d",
                                  "▁", "é", "世", "🚀", "\n", "<", "s", ">"};
  for (int round = 0; round < 500; ++round) {
    std::string text;
    for (int i = static_cast<int>(rng() % 20); i > 0; --i) text += alphabet[rng() % 16];
    std::string expected = text.empty() ? "" : " " + text;
    // A literal "▁" in the input decodes as a space: SentencePiece cannot tell them apart.
    std::string want;
    for (size_t i = 0; i < expected.size();) {
      if (expected.compare(i, 3, "▁") == 0) {
        want += ' ';
        i += 3;
      } else {
        want += expected[i++];
      }
    }
    ASSERT_EQ((*t)->decode((*t)->encode(text, false)), want) << text;
  }
}

TEST(SpmTokenizer, MissingByteTokensWithoutUnknownAreRefused) {
  Vocabulary v = spm_vocab();
  v.unk_id = -1;
  v.kinds[3 + 0x41] = TokenKind::kNormal;
  v.tokens[3 + 0x41] = "x";
  auto t = SpmTokenizer::create(v, true);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message,
            "spm tokenizer: the vocabulary has no byte-fallback token <0x41> and no unknown token");
}

}  // namespace
}  // namespace cutline::model
