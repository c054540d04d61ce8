// The non-streaming answer the gateway assembles from a stream keeps everything the upstream said:
// every choice, tool calls split over many chunks, reasoning, refusals and logprobs.

#include "cutline/proto/wire/completion_assembler.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include "cutline/proto/wire/openai_chunk.h"
#include "cutline/proto/wire/openai_writer.h"

namespace cutline::proto {
namespace {

std::string chunk(const std::string& choices) {
  return R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":)" +
         choices + "}";
}

std::string assemble_and_write(const std::vector<std::string>& chunks,
                               std::string_view finish_reason = "stop",
                               Endpoint endpoint = Endpoint::kChatCompletions) {
  CompletionAssembler a;
  for (const auto& c : chunks) EXPECT_TRUE(a.add(c).ok()) << c;
  CompletionFields f;
  f.endpoint = endpoint;
  f.id = "c1";
  f.created = 1;
  f.model = "m";
  f.finish_reason = finish_reason;
  f.choices = &a.choices();
  std::string out;
  write_completion(out, f);
  return out;
}

TEST(CompletionAssembler, ToolCallsSplitOverChunksComeBackWhole) {
  const std::string out = assemble_and_write(
      {chunk(
           R"([{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}])"),
       chunk(
           R"([{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}])"),
       chunk(
           R"([{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{}"}}]},"finish_reason":null}])"),
       chunk(
           R"([{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}])"),
       chunk(R"([{"index":0,"delta":{},"finish_reason":"tool_calls"}])")},
      "tool_calls");
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(out);
  simdjson::dom::element message = doc["choices"].at(0)["message"];
  EXPECT_TRUE(message["content"].is_null()) << out;
  simdjson::dom::array calls = message["tool_calls"];
  ASSERT_EQ(calls.size(), 2u) << out;
  EXPECT_EQ(std::string_view(calls.at(0)["id"]), "call_a");
  EXPECT_EQ(std::string_view(calls.at(0)["function"]["name"]), "get_weather");
  EXPECT_EQ(std::string_view(calls.at(0)["function"]["arguments"]), R"({"city":"Paris"})");
  EXPECT_EQ(std::string_view(calls.at(1)["id"]), "call_b");
  EXPECT_EQ(std::string_view(calls.at(1)["function"]["arguments"]), "{}");
  EXPECT_EQ(std::string_view(doc["choices"].at(0)["finish_reason"]), "tool_calls");
}

TEST(CompletionAssembler, EveryChoiceKeepsItsTextAndItsOwnFinishReason) {
  const std::string out = assemble_and_write(
      {chunk(
           R"([{"index":1,"delta":{"role":"assistant","content":"B1"},"finish_reason":null},{"index":0,"delta":{"role":"assistant","content":"A1"},"finish_reason":null}])"),
       chunk(R"([{"index":0,"delta":{"content":" A2"},"finish_reason":null}])"),
       chunk(R"([{"index":1,"delta":{"content":" B2"},"finish_reason":"stop"}])"),
       chunk(R"([{"index":0,"delta":{},"finish_reason":"length"}])")},
      "length");
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(out);
  simdjson::dom::array choices = doc["choices"];
  ASSERT_EQ(choices.size(), 2u) << out;
  EXPECT_EQ(int64_t(choices.at(0)["index"]), 0);
  EXPECT_EQ(std::string_view(choices.at(0)["message"]["content"]), "A1 A2");
  EXPECT_EQ(std::string_view(choices.at(0)["finish_reason"]), "length");
  EXPECT_EQ(std::string_view(choices.at(1)["message"]["content"]), "B1 B2");
  EXPECT_EQ(std::string_view(choices.at(1)["finish_reason"]), "stop");
}

TEST(CompletionAssembler, ACutChoiceWithoutItsOwnFinishTakesTheGatewaysReason) {
  const std::string out = assemble_and_write(
      {chunk(
          R"([{"index":0,"delta":{"content":"a"},"finish_reason":null},{"index":1,"delta":{"content":"b"},"finish_reason":null}])")},
      "length");
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(out);
  EXPECT_EQ(std::string_view(doc["choices"].at(1)["finish_reason"]), "length") << out;
}

TEST(CompletionAssembler, ReasoningRefusalAndLogprobsAreKept) {
  const std::string out = assemble_and_write(
      {chunk(
           R"([{"index":0,"delta":{"role":"assistant","reasoning_content":"think "},"logprobs":{"content":[{"token":"x","logprob":-0.5,"top_logprobs":[]}]},"finish_reason":null}])"),
       chunk(
           R"([{"index":0,"delta":{"reasoning_content":"more","content":"ok"},"logprobs":{"content":[{"token":"y","logprob":-1.0,"top_logprobs":[]}]},"finish_reason":null}])"),
       chunk(R"([{"index":0,"delta":{"refusal":""},"finish_reason":"stop"}])")});
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(out);
  simdjson::dom::element c0 = doc["choices"].at(0);
  EXPECT_EQ(std::string_view(c0["message"]["reasoning_content"]), "think more") << out;
  EXPECT_EQ(std::string_view(c0["message"]["content"]), "ok");
  EXPECT_EQ(std::string_view(c0["message"]["refusal"]), "");
  simdjson::dom::array lp = c0["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 2u) << out;
  EXPECT_EQ(std::string_view(lp.at(1)["token"]), "y");
}

TEST(CompletionAssembler, CompletionsTextAndUsageOnlyChunks) {
  const std::string out = assemble_and_write(
      {R"({"id":"c1","object":"text_completion","choices":[{"index":0,"text":"Hel","finish_reason":null}]})",
       R"({"id":"c1","object":"text_completion","choices":[{"index":0,"text":"lo","finish_reason":"stop"}]})",
       R"({"id":"c1","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}})"},
      "stop", Endpoint::kCompletions);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(out);
  EXPECT_EQ(std::string_view(doc["object"]), "text_completion");
  EXPECT_EQ(std::string_view(doc["choices"].at(0)["text"]), "Hello") << out;
}

TEST(CompletionAssembler, AMalformedChunkIsAnErrorAndChangesNothing) {
  CompletionAssembler a;
  ASSERT_TRUE(a.add(chunk(R"([{"index":0,"delta":{"content":"a"}}])")).ok());
  EXPECT_FALSE(a.add("not json").ok());
  EXPECT_FALSE(a.add(chunk(R"({"index":0})")).ok());
  EXPECT_FALSE(a.add(chunk(R"([{"index":0,"delta":{"content":"b"}}, 7])")).ok());
  EXPECT_FALSE(a.add(chunk(R"([{"index":-1,"delta":{}}])")).ok());
  // A bad choice after a good one: the good one is not applied either.
  EXPECT_FALSE(a.add(chunk(R"([{"index":3,"delta":{"content":"c"}},{"index":{}}])")).ok());
  ASSERT_EQ(a.choices().size(), 1u);
  EXPECT_EQ(a.choices()[0].content, "a");
}

// The relay hands the assembler a chunk it has parsed already when its choices are plain; the
// answer must be the one the assembler builds from the chunk's JSON, whatever the chunk holds.
TEST(CompletionAssembler, AParsedPlainChunkAssemblesAsItsJsonDoes) {
  struct Case {
    std::string json;
    bool plain;
  };
  const std::vector<Case> cases = {
      {chunk(R"([{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}])"),
       true},
      {chunk(R"([{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}])"),
       true},
      {chunk(
           R"([{"delta":{"role":"narrator","content":"lo"},"index":1},{"index":0,"delta":{"content":" w"}}])"),
       true},
      {chunk(R"([{"index":0,"delta":null,"finish_reason":null}])"), true},
      {chunk(R"([{"index":0,"delta":{"content":null,"role":"assistant"}}])"), true},
      {chunk(R"([{"index":0,"text":"abc","finish_reason":null}])"), true},
      {chunk(R"([{"index":0,"delta":{},"finish_reason":"stop"}])"), true},
      {chunk(R"([])"), true},
      {R"({"id":"c1","choices":null})", true},
      {R"({"id":"c1","usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}})", true},
      // Not plain: each needs the whole JSON.
      {chunk(R"([{"index":0,"delta":{"content":"a","content":"b"}}])"), false},
      {chunk(R"([{"index":0,"text":"t","delta":{"content":"d"}}])"), false},
      {chunk(R"([{"index":0,"delta":{"content":"d"},"text":"t"}])"), false},
      {chunk(R"([{"index":0,"delta":{"content":"x"},"index":1}])"), false},
      {chunk(R"([{"index":0,"delta":{"reasoning_content":"think"}}])"), false},
      {chunk(R"([{"index":0,"delta":{"refusal":"no"}}])"), false},
      {chunk(
           R"([{"index":0,"delta":{"content":"y"},"logprobs":{"content":[{"token":"y","logprob":-1}]}}])"),
       false},
      {chunk(R"([{"index":0,"message":{"role":"assistant","content":"whole"}}])"), false},
      {chunk(R"([{"index":0,"delta":{"content":"p"}}],"choices":[{"index":0,"delta":{}}])"), false},
      {chunk(R"([{"index":-1,"delta":{"content":"n"}}])"), false},
  };
  CompletionAssembler from_json;
  CompletionAssembler from_parse;
  ChunkParser parser;
  for (const Case& c : cases) {
    ASSERT_TRUE(parser.parse(c.json).ok()) << c.json;
    EXPECT_EQ(parser.chunk().choices_plain, c.plain) << c.json;
    const Status by_json = from_json.add(c.json);
    const Status by_parse = c.plain ? from_parse.add(parser.chunk()) : from_parse.add(c.json);
    EXPECT_EQ(by_json.ok(), by_parse.ok()) << c.json;
  }
  const auto write = [](const CompletionAssembler& a) {
    CompletionFields f;
    f.endpoint = Endpoint::kChatCompletions;
    f.id = "c1";
    f.created = 1;
    f.model = "m";
    f.finish_reason = "stop";
    f.choices = &a.choices();
    std::string out;
    write_completion(out, f);
    return out;
  };
  EXPECT_EQ(write(from_parse), write(from_json));
  ASSERT_EQ(from_parse.choices().size(), 2u);
  EXPECT_EQ(from_parse.choices()[0].content, "Hel wabcatdtdxywholep");
}

}  // namespace
}  // namespace cutline::proto
