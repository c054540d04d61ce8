#include "cutline/base/json_string.h"

#include <gtest/gtest.h>

#include <string>

namespace cutline::base {
namespace {

TEST(JsonStringTest, DecodesEscapesAndSurrogatePairs) {
  std::string out;
  EXPECT_TRUE(decode_json_string(R"("a\"b\\c\/\n\u0041\ud83d\ude00")", out));
  EXPECT_EQ(out, "a\"b\\c/\nA\xF0\x9F\x98\x80");
  out.clear();
  EXPECT_TRUE(decode_json_string(R"("\ud800x")", out));  // lone surrogate -> U+FFFD
  EXPECT_EQ(out, "\xEF\xBF\xBDx");
  EXPECT_FALSE(decode_json_string(R"("\q")", out));
  EXPECT_FALSE(decode_json_string(R"(abc)", out));
}

TEST(JsonStringTest, AppendThenDecodeRoundTrips) {
  const std::string text = "quote \" backslash \\ tab \t control \x01 \xc3\xa9";
  std::string literal;
  append_json_string(literal, text);
  std::string back;
  ASSERT_TRUE(decode_json_string(literal, back));
  EXPECT_EQ(back, text);
}

// Every byte that needs an escape is found wherever it sits in a string (the scan reads eight
// bytes at a time), and bytes that need none, UTF-8 and DEL included, are copied as they are.
TEST(JsonStringTest, EscapesAByteAtEveryPositionAndLength) {
  const std::string specials = std::string("\"\\\x01\x1f\n") + '\0';
  for (size_t len = 1; len <= 24; ++len) {
    for (size_t at = 0; at < len; ++at) {
      for (char special : specials) {
        std::string text(len, 'a');
        for (size_t i = 0; i < len; i += 3) text[i] = static_cast<char>(0x7f + i % 0x80);
        text[at] = special;
        std::string literal;
        append_json_string(literal, text);
        std::string back;
        ASSERT_TRUE(decode_json_string(literal, back)) << literal;
        EXPECT_EQ(back, text);
        // The escaped byte itself never appears raw between the quotes (a quote or a backslash
        // only as part of an escape).
        const std::string_view inner(literal.data() + 1, literal.size() - 2);
        if (special != '"' && special != '\\') {
          EXPECT_EQ(inner.find(special), std::string_view::npos) << len << " " << at;
        } else {
          EXPECT_EQ(inner.find(std::string("\\") + special), at) << len << " " << at;
        }
      }
    }
  }
  std::string plain;
  append_json_string(plain, "caf\xc3\xa9 \x7f 0123456789abcdef");
  EXPECT_EQ(plain, "\"caf\xc3\xa9 \x7f 0123456789abcdef\"");
}

}  // namespace
}  // namespace cutline::base
