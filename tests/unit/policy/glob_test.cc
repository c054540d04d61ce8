#include "cutline/policy/glob.h"

#include <gtest/gtest.h>

#include <string>

namespace cutline::policy {
namespace {

TEST(Glob, StarsAndQuestionMarks) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "anything"));
  EXPECT_TRUE(glob_match("gpt-*", "gpt-4o"));
  EXPECT_FALSE(glob_match("gpt-*", "llama-3"));
  EXPECT_TRUE(glob_match("llama-?-8b", "llama-3-8b"));
  EXPECT_FALSE(glob_match("llama-?-8b", "llama-31-8b"));
  EXPECT_TRUE(glob_match("*-8b*", "llama-3-8b-instruct"));
  EXPECT_TRUE(glob_match("/v1/*", "/v1/chat/completions"));
  EXPECT_FALSE(glob_match("/v1/chat/completions", "/v1/chat/completions/x"));
  EXPECT_FALSE(glob_match("Gpt-*", "gpt-4"));  // case-sensitive
  EXPECT_TRUE(glob_match("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(glob_match("a*b*c", "aXbYbZ"));
}

TEST(Glob, PathologicalPatternsStayFast) {
  const std::string text(5000, 'a');
  EXPECT_FALSE(glob_match("*a*a*a*a*a*a*a*a*b", text));
}

TEST(Glob, IsGlob) {
  EXPECT_TRUE(is_glob("team-*"));
  EXPECT_TRUE(is_glob("a?"));
  EXPECT_FALSE(is_glob("alice"));
}

}  // namespace
}  // namespace cutline::policy
