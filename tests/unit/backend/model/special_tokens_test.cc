#include "cutline/model/special_tokens.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "cutline/model/bpe_tokenizer.h"
#include "cutline/model/bpe_trainer.h"
#include "cutline/model/spm_tokenizer.h"

namespace cutline::model {
namespace {

// 256 byte tokens, then Llama 3's header and turn tokens (control), a user-defined token and
// a control token whose text contains another's ("<|eot|>" inside "<|eot|>x").
std::unique_ptr<BpeTokenizer> llama3_like() {
  Vocabulary v;
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(byte_to_unicode(static_cast<uint8_t>(b)));
  v.kinds.assign(v.tokens.size(), TokenKind::kNormal);
  for (const char* s : {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                        "<|eot_id|>", "<|eot|>", "<|eot|>x"}) {
    v.tokens.emplace_back(s);
    v.kinds.push_back(TokenKind::kControl);
  }
  v.tokens.emplace_back("<tool>");
  v.kinds.push_back(TokenKind::kUserDefined);
  v.bos_id = 256;
  v.add_bos = true;
  v.eos_ids = {259};
  auto t = BpeTokenizer::create(std::move(v), {}, PreTokenizer::kLlama3);
  EXPECT_TRUE(t.ok());
  return std::move(t).value();
}

TEST(SpecialTokens, RawPromptNamesHeaderAndTurnTokens) {
  auto t = llama3_like();
  const std::string prompt = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
  // Without parsing, every character is text (here one byte token each: no merges).
  EXPECT_EQ(t->encode(prompt, false).size(), prompt.size());
  std::vector<int32_t> ids = encode_with_special_tokens(*t, prompt, false);
  ASSERT_EQ(ids.size(), 11u);  // 3 specials + "user", "\n\n", "Hi" a byte token each (no merges)
  EXPECT_EQ(ids.front(), 257);
  EXPECT_EQ(ids[5], 258);
  EXPECT_EQ(ids.back(), 259);
  // BOS first when asked for, and a BOS named in the text is a second BOS.
  ids = encode_with_special_tokens(*t, "<|begin_of_text|>Hi", true);
  EXPECT_EQ(ids, (std::vector<int32_t>{256, 256, 'H', 'i'}));
}

TEST(SpecialTokens, LongestTokenWinsAndTextBetweenIsKept) {
  auto t = llama3_like();
  auto fragments = split_special_tokens(*t, "a<|eot|>xb<|eot|><tool>c");
  ASSERT_EQ(fragments.size(), 6u);
  EXPECT_EQ(fragments[0].text, "a");
  EXPECT_EQ(fragments[1].token, 261);  // "<|eot|>x", longer than "<|eot|>"
  EXPECT_EQ(fragments[2].text, "b");
  EXPECT_EQ(fragments[3].token, 260);
  EXPECT_EQ(fragments[4].token, 262);  // user-defined
  EXPECT_EQ(fragments[5].text, "c");
  EXPECT_TRUE(split_special_tokens(*t, "").empty());
  // Control tokens off: only the user-defined token is split out.
  fragments = split_special_tokens(*t, "a<|eot|><tool>", false);
  ASSERT_EQ(fragments.size(), 2u);
  EXPECT_EQ(fragments[0].text, "a<|eot|>");
  EXPECT_EQ(fragments[1].token, 262);
  // Half a token is text.
  fragments = split_special_tokens(*t, "<|eot_id");
  ASSERT_EQ(fragments.size(), 1u);
  EXPECT_EQ(fragments[0].token, -1);
}

// A user-defined token (Qwen's <tool_call>, <think>) is text the model writes: the engine's
// detokenization (control tokens give nothing) yields its characters, so a tool-call parser
// reading the output sees the tag.
TEST(SpecialTokens, UserDefinedTokensDecodeToTheirText) {
  auto t = llama3_like();
  EXPECT_FALSE(t->is_control(262));
  EXPECT_EQ(t->token_bytes(262), "<tool>");
  EXPECT_TRUE(t->is_control(259));
  EXPECT_EQ(encode_with_special_tokens(*t, "<tool>", false, false), (std::vector<int32_t>{262}));
}

TEST(SpecialTokens, Phi3TokensTakeTheWhiteSpaceAfterThem) {
  Vocabulary v;
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(byte_to_unicode(static_cast<uint8_t>(b)));
  v.kinds.assign(v.tokens.size(), TokenKind::kNormal);
  for (const char* s : {"<|user|>", "<|end|>", "<s>"}) {
    v.tokens.emplace_back(s);
    v.kinds.push_back(TokenKind::kControl);
  }
  v.special_rstrip = true;
  auto t = BpeTokenizer::create(std::move(v), {}, PreTokenizer::kGpt2);
  ASSERT_TRUE(t.ok());
  // As llama.cpp for phi3: "<|user|>\nHi<|end|>\n" is <|user|> H i <|end|>; <s> keeps its space.
  EXPECT_EQ(encode_with_special_tokens(**t, "<|user|>\nHi<|end|>\n<s> x", false),
            (std::vector<int32_t>{256, 'H', 'i', 257, 258, ' ', 'x'}));
}

TEST(SpecialTokens, ControlTokensShowTheirTextForDisplay) {
  auto t = llama3_like();
  EXPECT_EQ(t->token_bytes(259), "");
  EXPECT_EQ(token_display_text(*t, 259), "<|eot_id|>");
  EXPECT_EQ(token_display_text(*t, 'A'), "A");
  EXPECT_EQ(token_display_text(*t, 262), "<tool>");
}

TEST(SpecialTokens, SentencePiecePrefixesEachTextFragmentWithASpace) {
  Vocabulary v;
  auto add = [&](std::string text, TokenKind kind) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(0);
    v.kinds.push_back(kind);
  };
  add("<unk>", TokenKind::kUnknown);
  add("<s>", TokenKind::kControl);
  add("</s>", TokenKind::kControl);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, TokenKind::kByte);
  }
  for (const char* piece : {"\xE2\x96\x81hi", "\xE2\x96\x81h", "\xE2\x96\x81", "h", "i"})
    add(piece, TokenKind::kNormal);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  auto t = SpmTokenizer::create(std::move(v), true);
  ASSERT_TRUE(t.ok());
  const int32_t hi = 259;
  // As llama.cpp: "<s>hi</s>hi" is <s> ▁hi </s> ▁hi (a space prefix after each special token).
  EXPECT_EQ(encode_with_special_tokens(**t, "<s>hi</s>hi", false),
            (std::vector<int32_t>{1, hi, 2, hi}));
  EXPECT_EQ(encode_with_special_tokens(**t, "hi", true), (std::vector<int32_t>{1, hi}));
}

}  // namespace
}  // namespace cutline::model
