// Fuzz target for the tokenizers: any byte string round-trips through a byte-level BPE tokenizer
// (three pre-tokenizers) and a SentencePiece tokenizer, no control token is produced from text,
// and streaming detokenization releases valid UTF-8 only.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "cutline/model/bpe_tokenizer.h"
#include "cutline/model/bpe_trainer.h"
#include "cutline/model/spm_tokenizer.h"

namespace {

using namespace cutline::model;

constexpr std::string_view kText =
    "The quick brown fox jumps over the lazy dog. Hello, world! It's 2026-11-30 12:30.\n"
    "def f(x):\n    return x * 2\n\nПривет мир. 世界你好。 ¿Dónde está? 🚀🚀 <|im_start|>";

std::unique_ptr<Tokenizer> make_bpe(PreTokenizer pre) {
  BpeVocabulary bpe = train_bpe(kText, 200, pre);
  Vocabulary v;
  v.tokens = bpe.tokens;
  v.tokens.push_back("<|im_start|>");
  v.kinds.assign(v.tokens.size(), TokenKind::kNormal);
  v.kinds.back() = TokenKind::kControl;
  std::vector<std::string_view> merges(bpe.merges.begin(), bpe.merges.end());
  auto t = BpeTokenizer::create(std::move(v), merges, pre);
  if (!t.ok()) __builtin_trap();
  return std::move(t).value();
}

std::unique_ptr<Tokenizer> make_spm() {
  Vocabulary v;
  auto add = [&](std::string text, float score, TokenKind kind) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.kinds.push_back(kind);
  };
  add("<unk>", 0, TokenKind::kUnknown);
  add("<s>", 0, TokenKind::kControl);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name, 0, TokenKind::kByte);
  }
  float score = -1;
  for (const char* p : {"▁", "▁t", "▁th", "▁the", "he", "e", "h", "t", "o", "▁o", "n", "on"}) {
    add(p, score--, TokenKind::kNormal);
  }
  v.unk_id = 0;
  auto t = SpmTokenizer::create(std::move(v), true);
  if (!t.ok()) __builtin_trap();
  return std::move(t).value();
}

bool valid_utf8(std::string_view s) {
  Utf8Streamer check;
  return check.push(s) == s && check.flush().empty();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<Tokenizer> kBpe[] = {make_bpe(PreTokenizer::kGpt2),
                                                    make_bpe(PreTokenizer::kLlama3),
                                                    make_bpe(PreTokenizer::kQwen2)};
  static const std::unique_ptr<Tokenizer> kSpm = make_spm();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& t : kBpe) {
    std::vector<int32_t> ids = t->encode(text, false);
    for (int32_t id : ids) {
      if (t->is_control(id)) __builtin_trap();
    }
    if (t->decode(ids) != text) __builtin_trap();
    Utf8Streamer streamer;
    for (int32_t id : ids) {
      if (!valid_utf8(streamer.push(t->token_bytes(id)))) __builtin_trap();
    }
    if (!valid_utf8(streamer.flush())) __builtin_trap();
  }
  // SentencePiece adds a leading space and cannot tell "▁" from " ".
  std::vector<int32_t> ids = kSpm->encode(text, false);
  std::string expected = text.empty() ? "" : " ";
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
      expected += ' ';
      i += 3;
    } else {
      expected += text[i++];
    }
  }
  if (kSpm->decode(ids) != expected) __builtin_trap();
  for (int32_t id : ids) {
    if (kSpm->is_control(id)) __builtin_trap();
  }
  return 0;
}
