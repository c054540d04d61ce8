#include "cutline/engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace cutline::engine {
namespace {

std::string feed(StopMatcher& m, std::initializer_list<std::string_view> pieces, bool* matched) {
  std::string out;
  *matched = false;
  for (auto p : pieces) {
    auto scan = m.push(p);
    out += scan.released;
    if (scan.matched) {
      *matched = true;
      return out;
    }
  }
  return out + m.flush();
}

TEST(StopMatcher, NoStopsReleasesEverythingAtOnce) {
  StopMatcher m;
  EXPECT_EQ(m.push("ab").released, "ab");
  EXPECT_FALSE(m.push("cd").matched);
}

TEST(StopMatcher, MatchAcrossTokenBoundariesIsNotEmitted) {
  StopMatcher m({"END"});
  bool matched;
  EXPECT_EQ(feed(m, {"the ", "E", "N", "D", " more"}, &matched), "the ");
  EXPECT_TRUE(matched);
}

TEST(StopMatcher, TextBeforeTheMatchInsideOneTokenIsEmitted) {
  StopMatcher m({"\n\n"});
  bool matched;
  EXPECT_EQ(feed(m, {"one", "two\n", "\nthree"}, &matched), "onetwo");
  EXPECT_TRUE(matched);
}

TEST(StopMatcher, HoldsBackOnlyAPossiblePrefixAndReleasesItWhenItCannotMatch) {
  StopMatcher m({"END"});
  auto s1 = m.push("abcE");
  EXPECT_EQ(s1.released, "abc");
  EXPECT_EQ(m.held(), "E");
  auto s2 = m.push("N");
  EXPECT_EQ(s2.released, "");
  auto s3 = m.push("X");  // "ENX" cannot become "END"
  EXPECT_EQ(s3.released, "ENX");
  EXPECT_FALSE(s3.matched);
  EXPECT_EQ(m.held(), "");
}

TEST(StopMatcher, FlushReleasesHeldTextAtEndOfSequence) {
  StopMatcher m({"END"});
  bool matched;
  EXPECT_EQ(feed(m, {"fin", "EN"}, &matched), "finEN");
  EXPECT_FALSE(matched);
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"xyz", "b"});
  bool matched;
  auto scan = m.push("axyzb");
  EXPECT_TRUE(scan.matched);
  EXPECT_EQ(scan.released, "a");
  EXPECT_EQ(scan.matched_string, "xyz");
  (void)matched;
}

TEST(StopMatcher, OverlappingPrefixesAreHandled) {
  // "aab" appears only after a false start "aa a".
  StopMatcher m({"aab"});
  bool matched;
  EXPECT_EQ(feed(m, {"a", "a", "a", "b", "c"}, &matched), "a");
  EXPECT_TRUE(matched);
}

TEST(StopMatcher, WorksOnBytesInsideUtf8Characters) {
  StopMatcher m({"\xA9!"});  // second byte of 'é' followed by '!'
  bool matched;
  EXPECT_EQ(feed(m, {"caf\xC3", "\xA9", "!"}, &matched), "caf\xC3");
  EXPECT_TRUE(matched);
}

TEST(StopMatcher, EmptyStopStringsAreIgnored) {
  StopMatcher m({""});
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.push("x").released, "x");
}

TEST(StopMatcher, NothingIsReleasedAfterAMatch) {
  StopMatcher m({"stop"});
  EXPECT_TRUE(m.push("stop").matched);
  EXPECT_EQ(m.push("more").released, "");
  EXPECT_EQ(m.flush(), "");
}

}  // namespace
}  // namespace cutline::engine
