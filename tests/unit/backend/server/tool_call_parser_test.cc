#include "cutline/server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cutline::server {
namespace {

struct Output {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

ToolCallParser make_parser(std::string prefix = "", bool parallel = true) {
  return ToolCallParser(std::move(prefix), parallel,
                        [n = 0]() mutable { return "call_" + std::to_string(n++); });
}

// Feeds `pieces` one push each, then finishes.
Output run(const std::vector<std::string>& pieces, std::string prefix = "", bool parallel = true) {
  ToolCallParser p = make_parser(std::move(prefix), parallel);
  Output out;
  for (const std::string& piece : pieces) p.push(piece, out.content, out.calls);
  p.finish(out.content);
  return out;
}

const std::string kTwoCalls =
    "Checking both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": "
    "\"caf\xc3\xa9 </tool_call> <tool_call>\", \"n\": 2}}\n</tool_call>";

void expect_two_calls(const Output& out) {
  EXPECT_EQ(out.content, "Checking both.");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].index, 0);
  EXPECT_EQ(out.calls[0].id, "call_0");
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(out.calls[1].index, 1);
  EXPECT_EQ(out.calls[1].name, "search");
}

TEST(ToolCallParser, TextBeforeAndSeveralCalls) { expect_two_calls(run({kTwoCalls})); }

TEST(ToolCallParser, SplitAtEveryByteBoundary) {
  for (size_t cut = 0; cut <= kTwoCalls.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    expect_two_calls(run({kTwoCalls.substr(0, cut), kTwoCalls.substr(cut)}));
  }
  std::vector<std::string> bytes;
  for (char c : kTwoCalls) bytes.emplace_back(1, c);
  expect_two_calls(run(bytes));
}

TEST(ToolCallParser, ContentStreamsAtOnceAndHoldsOnlyAPossibleTag) {
  ToolCallParser p = make_parser();
  Output out;
  p.push("Hello <b>world</b> <tool", out.content, out.calls);
  EXPECT_EQ(out.content, "Hello <b>world</b>");  // " <tool" may open a call
  p.push("box> done", out.content, out.calls);
  EXPECT_EQ(out.content, "Hello <b>world</b> <toolbox> done");
  p.finish(out.content);
  EXPECT_EQ(out.content, "Hello <b>world</b> <toolbox> done");
  EXPECT_TRUE(out.calls.empty());
}

TEST(ToolCallParser, MalformedJsonIsReturnedAsContent) {
  const std::string text =
      "Sure.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call> after";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    Output out = run({text.substr(0, cut), text.substr(cut)});
    EXPECT_EQ(out.content, text) << "cut at " << cut;
    EXPECT_TRUE(out.calls.empty());
  }
  // Not a call object: no name, arguments not an object, trailing bytes.
  for (std::string inner : {"{\"arguments\": {}}", "{\"name\": \"f\", \"arguments\": \"x\"}",
                            "{\"name\": \"f\", \"arguments\": {}} extra", "[1]"}) {
    Output out = run({"<tool_call>" + inner + "</tool_call>"});
    EXPECT_EQ(out.content, "<tool_call>" + inner + "</tool_call>");
    EXPECT_TRUE(out.calls.empty());
  }
}

TEST(ToolCallParser, AValidCallBesideAMalformedOneKeepsBoth) {
  Output out =
      run({"<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n"
           "<tool_call>{oops}</tool_call>"});
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "a");
  EXPECT_EQ(out.calls[0].arguments, "{}");
  EXPECT_EQ(out.content, "<tool_call>{oops}</tool_call>");
}

TEST(ToolCallParser, AnUnclosedCallAtTheEndIsContent) {
  Output out = run({"Wait <tool_call>\n{\"name\": \"f\", \"argu"});
  EXPECT_EQ(out.content, "Wait <tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(out.calls.empty());
  Output partial = run({"ends with <tool_c"});
  EXPECT_EQ(partial.content, "ends with <tool_c");
}

TEST(ToolCallParser, ForcedPrefixIsReadFirst) {
  Output required =
      run({"{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n</tool_call>"}, "<tool_call>\n");
  ASSERT_EQ(required.calls.size(), 1u);
  EXPECT_EQ(required.calls[0].arguments, "{\"a\":[1,2]}");
  EXPECT_EQ(required.content, "");
  Output named =
      run({"{\"a\": 1}}\n</tool_call>"}, "<tool_call>\n{\"name\": \"f\", \"arguments\": ");
  ASSERT_EQ(named.calls.size(), 1u);
  EXPECT_EQ(named.calls[0].name, "f");
  EXPECT_EQ(named.calls[0].arguments, "{\"a\":1}");
}

TEST(ToolCallParser, WithoutParallelCallsOnlyTheFirstIsReturned) {
  Output out = run({kTwoCalls}, "", false);
  EXPECT_EQ(out.content, "Checking both.");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
}

}  // namespace
}  // namespace cutline::server
