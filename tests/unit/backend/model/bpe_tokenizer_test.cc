#include "cutline/model/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "cutline/model/bpe_trainer.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/synth.h"
#include "cutline/model/tokenizer_loader.h"
#include "support/unique_temp_path.h"

namespace cutline::model {
namespace {

// 256 byte tokens, then `extra` normal tokens, then the control token <|ctl|>.
Vocabulary byte_vocab(std::vector<std::string> extra) {
  Vocabulary v;
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(byte_to_unicode(static_cast<uint8_t>(b)));
  for (std::string& e : extra) v.tokens.push_back(std::move(e));
  v.tokens.push_back("<|ctl|>");
  v.kinds.assign(v.tokens.size(), TokenKind::kNormal);
  v.kinds.back() = TokenKind::kControl;
  v.bos_id = v.size() - 1;
  v.eos_ids = {v.size() - 1};
  return v;
}

std::vector<std::string> pieces(const Tokenizer& t, std::string_view text) {
  std::vector<std::string> out;
  for (int32_t id : t.encode(text, false)) out.emplace_back(t.token_bytes(id));
  return out;
}

using V = std::vector<std::string>;

TEST(BpeTokenizer, AppliesMergesByRankNotByPosition) {
  std::vector<std::string_view> by_bc = {"b c", "a b", "ab c"};
  auto t = BpeTokenizer::create(byte_vocab({"ab", "bc", "abc"}), by_bc, PreTokenizer::kGpt2);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(pieces(**t, "abc"), (V{"a", "bc"}));
  std::vector<std::string_view> by_ab = {"a b", "b c", "ab c"};
  t = BpeTokenizer::create(byte_vocab({"ab", "bc", "abc"}), by_ab, PreTokenizer::kGpt2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(pieces(**t, "abc"), (V{"abc"}));
  // Equal ranks resolve left to right: "aaa" with "a a" is "aa" + "a".
  std::vector<std::string_view> aa = {"a a"};
  t = BpeTokenizer::create(byte_vocab({"aa"}), aa, PreTokenizer::kGpt2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(pieces(**t, "aaa"), (V{"aa", "a"}));
  EXPECT_EQ(pieces(**t, "aaaa"), (V{"aa", "aa"}));
}

TEST(BpeTokenizer, MergesNeverCrossPreTokenizerChunks) {
  std::vector<std::string_view> merges = {"a Ġ", "Ġ b"};
  auto t = BpeTokenizer::create(byte_vocab({"aĠ", "Ġb"}), merges, PreTokenizer::kGpt2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(pieces(**t, "a b"), (V{"a", " b"}));
}

TEST(BpeTokenizer, ControlTokensAreNeverProducedFromText) {
  std::vector<std::string_view> none;
  auto t = BpeTokenizer::create(byte_vocab({}), none, PreTokenizer::kLlama3);
  ASSERT_TRUE(t.ok());
  int32_t ctl = (*t)->special_token_id("<|ctl|>");
  EXPECT_EQ(ctl, 256);
  EXPECT_TRUE((*t)->is_control(ctl));
  EXPECT_EQ((*t)->token_bytes(ctl), "");  // control tokens print nothing
  for (int32_t id : (*t)->encode("<|ctl|>", false)) EXPECT_NE(id, ctl);
  EXPECT_EQ((*t)->decode((*t)->encode("<|ctl|>", false)), "<|ctl|>");
  EXPECT_EQ((*t)->special_token_id("a"), -1);  // only special tokens are looked up by text
  EXPECT_EQ((*t)->token_bytes(-1), "");
  EXPECT_EQ((*t)->token_bytes(100000), "");
}

TEST(BpeTokenizer, BosIsAddedOnlyWhenTheModelWantsIt) {
  std::vector<std::string_view> none;
  Vocabulary v = byte_vocab({});
  v.add_bos = true;
  auto t = BpeTokenizer::create(v, none, PreTokenizer::kGpt2);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->encode("a", true), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ((*t)->encode("a", false), (std::vector<int32_t>{'a'}));
  v.add_bos = false;
  t = BpeTokenizer::create(v, none, PreTokenizer::kGpt2);
  EXPECT_EQ((*t)->encode("a", true), (std::vector<int32_t>{'a'}));
}

TEST(BpeTokenizer, BadVocabulariesAreRefusedWithTheReason) {
  std::vector<std::string_view> merges = {"a q"};
  auto t = BpeTokenizer::create(byte_vocab({}), merges, PreTokenizer::kGpt2);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message,
            "bpe tokenizer: merge 0 'a q' names a token missing from the vocabulary");
  std::vector<std::string_view> bad = {"abc"};
  t = BpeTokenizer::create(byte_vocab({}), bad, PreTokenizer::kGpt2);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message,
            "bpe tokenizer: merge 0 'abc' is not two tokens separated by a space");
  Vocabulary v = byte_vocab({});
  v.tokens[65] = "zz";
  std::vector<std::string_view> none;
  t = BpeTokenizer::create(v, none, PreTokenizer::kGpt2);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, "bpe tokenizer: the vocabulary has no token for byte 65 ('A')");
}

class SynthTokenizer : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string path = test::unique_temp_path("bpe_tokenizer_test.gguf");
    ASSERT_TRUE(synthesize_tiny_model(SynthOptions{}, path).ok());
    file_ = GgufFile::open(path).value().release();
    tokenizer_ = load_tokenizer(*file_).value().release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete file_;
  }
  static GgufFile* file_;
  static Tokenizer* tokenizer_;
};
GgufFile* SynthTokenizer::file_ = nullptr;
Tokenizer* SynthTokenizer::tokenizer_ = nullptr;

// Random valid UTF-8: ASCII, white space, 2-, 3- and 4-byte characters.
std::string random_utf8(std::mt19937& rng, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    uint32_t cp;
    switch (rng() % 6) {
      case 0:
        cp = 0x20 + rng() % 0x5F;
        break;
      case 1:
        cp = " \n\t\r"[rng() % 4];
        break;
      case 2:
        cp = 0x80 + rng() % (0x800 - 0x80);
        break;
      case 3:
        do cp = 0x800 + rng() % (0x10000 - 0x800);
        while (cp >= 0xD800 && cp <= 0xDFFF);
        break;
      case 4:
        cp = 0x10000 + rng() % (0x110000 - 0x10000);
        break;
      default:
        cp = 'a' + rng() % 26;
        break;
    }
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return s;
}

TEST_F(SynthTokenizer, RoundTripsRandomUtf8) {
  std::mt19937 rng(11);
  for (int round = 0; round < 500; ++round) {
    std::string text = random_utf8(rng, static_cast<int>(rng() % 40));
    std::vector<int32_t> ids = tokenizer_->encode(text, false);
    for (int32_t id : ids) ASSERT_FALSE(tokenizer_->is_control(id));
    ASSERT_EQ(tokenizer_->decode(ids), text);
  }
}

TEST_F(SynthTokenizer, RoundTripsArbitraryBytes) {
  std::mt19937 rng(5);
  for (int round = 0; round < 200; ++round) {
    std::string text;
    for (int i = static_cast<int>(rng() % 30); i > 0; --i) text += static_cast<char>(rng());
    ASSERT_EQ(tokenizer_->decode(tokenizer_->encode(text, false)), text);
  }
}

TEST_F(SynthTokenizer, StreamingDecodeNeverSplitsACharacter) {
  std::string text = "Привет, 世界! 🚀 naïve café";
  Utf8Streamer streamer;
  std::string out;
  for (int32_t id : tokenizer_->encode(text, false)) {
    std::string piece = streamer.push(tokenizer_->token_bytes(id));
    Utf8Streamer check;  // each released piece is whole UTF-8 on its own
    EXPECT_EQ(check.push(piece), piece);
    EXPECT_EQ(check.flush(), "");
    out += piece;
  }
  out += streamer.flush();
  EXPECT_EQ(out, text);
}

TEST_F(SynthTokenizer, LongPromptsEncodeInMilliseconds) {
  std::string text;
  std::mt19937 rng(3);
  while (text.size() < 200000) {
    text += "The meeting has been moved to Thursday at ten o'clock, and 1234 people came. ";
    text += random_utf8(rng, 20);
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = tokenizer_->encode(text, false);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(tokenizer_->decode(ids), text);
  std::printf("encoded %zu bytes into %zu tokens in %.1f ms\n", text.size(), ids.size(), ms);
  // Linear-time merging: ~100k tokens take tens of ms; quadratic rescans would take seconds.
  EXPECT_LT(ms, 2000.0);
}

}  // namespace
}  // namespace cutline::model
