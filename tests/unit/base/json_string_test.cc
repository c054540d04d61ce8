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

}  // namespace
}  // namespace cutline::base
