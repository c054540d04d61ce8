#include <gtest/gtest.h>

#include "cutline/model/tokenizer.h"

namespace cutline::model {
namespace {

TEST(Utf8Streamer, HoldsBackAnIncompleteCharacterUntilItCompletes) {
  Utf8Streamer s;
  std::string snowman = "\xE2\x98\x83";
  EXPECT_EQ(s.push("a\xE2"), "a");
  EXPECT_EQ(s.push("\x98"), "");
  EXPECT_EQ(s.push("\x83!"), snowman + "!");
  EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Streamer, FourByteCharacterSplitByteByByte) {
  Utf8Streamer s;
  std::string rocket = "\xF0\x9F\x9A\x80";
  for (size_t i = 0; i + 1 < rocket.size(); ++i) EXPECT_EQ(s.push(rocket.substr(i, 1)), "") << i;
  EXPECT_EQ(s.push(rocket.substr(3)), rocket);
}

TEST(Utf8Streamer, InvalidBytesBecomeReplacementCharacters) {
  Utf8Streamer s;
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(s.push("\xFFx"), r + "x");
  EXPECT_EQ(s.push("\xE2\x28"), r + "(");        // lead byte then a non-continuation
  EXPECT_EQ(s.push("\xED\xA0\x80"), r + r + r);  // surrogate: never valid
  EXPECT_EQ(s.push("\xC0\xAF"), r + r);          // overlong
  EXPECT_EQ(s.push("\xF0\x9F"), "");
  EXPECT_EQ(s.flush(), r);  // an incomplete tail at the end
  EXPECT_EQ(s.flush(), "");
}

TEST(Utf8Streamer, OutputIsAlwaysValidUtf8AndLosesNothingValid) {
  std::string text = "héllo wörld — 世界 🚀 ok";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    Utf8Streamer s;
    std::string a = s.push(text.substr(0, cut));
    std::string b = s.push(text.substr(cut));
    EXPECT_EQ(a + b + s.flush(), text) << cut;
  }
}

}  // namespace
}  // namespace cutline::model
