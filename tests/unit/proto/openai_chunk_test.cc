#include "cutline/proto/wire/openai_chunk.h"

#include <gtest/gtest.h>

#include "cutline/proto/wire/openai_response.h"

namespace cutline::proto {
namespace {

TEST(OpenAiChunkTest, ChatDeltaChunk) {
  ChunkParser p;
  ASSERT_TRUE(p.parse(R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,
    "model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant",
    "content":"Hel\u006co \"x\""},"logprobs":null,"finish_reason":null}]})")
                  .ok());
  const ParsedChunk& c = p.chunk();
  EXPECT_EQ(c.id, "chatcmpl-1");
  EXPECT_EQ(c.object, "chat.completion.chunk");
  EXPECT_EQ(c.model, "m");
  EXPECT_EQ(c.created, 1700000000);
  ASSERT_EQ(c.choices.size(), 1u);
  EXPECT_EQ(c.content(), "Hello \"x\"");
  EXPECT_TRUE(c.choices[0].has_content);
  EXPECT_EQ(c.choices[0].role, "assistant");
  EXPECT_FALSE(c.choices[0].has_finish_reason);
  EXPECT_EQ(c.finish_reason(), "");
  EXPECT_FALSE(c.usage);
  EXPECT_FALSE(c.error);
  EXPECT_FALSE(c.cutline);
}

TEST(OpenAiChunkTest, FinishReasonUsageAndToolCalls) {
  ChunkParser p;
  ASSERT_TRUE(p.parse(R"({"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]},
    "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":34,
    "total_tokens":46}})")
                  .ok());
  const ParsedChunk& c = p.chunk();
  ASSERT_EQ(c.choices.size(), 1u);
  EXPECT_TRUE(c.choices[0].has_tool_calls);
  EXPECT_FALSE(c.choices[0].has_content);
  EXPECT_EQ(c.finish_reason(), "tool_calls");
  ASSERT_TRUE(c.usage);
  EXPECT_EQ(*c.usage, (Usage{12, 34, 46}));
}

TEST(OpenAiChunkTest, UsageOnlyChunkAndCompletionsText) {
  ChunkParser p;
  ASSERT_TRUE(
      p.parse(R"({"id":"x","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}})").ok());
  EXPECT_TRUE(p.chunk().choices.empty());
  EXPECT_EQ(p.chunk().usage->completion_tokens, 2);
  ASSERT_TRUE(p.parse(R"({"object":"text_completion","choices":[{"index":0,"text":" world",
    "finish_reason":"length"}],"usage":null})")
                  .ok());
  EXPECT_EQ(p.chunk().content(), " world");
  EXPECT_EQ(p.chunk().finish_reason(), "length");
  EXPECT_FALSE(p.chunk().usage);  // state from the previous chunk is gone
}

TEST(OpenAiChunkTest, ErrorShapes) {
  ChunkParser p;
  ASSERT_TRUE(
      p.parse(R"({"error":{"message":"boom","type":"server_error","param":null,"code":500}})")
          .ok());
  ASSERT_TRUE(p.chunk().error);
  EXPECT_EQ(p.chunk().error->message, "boom");
  EXPECT_EQ(p.chunk().error->type, "server_error");
  EXPECT_EQ(p.chunk().error->code, "500");
  ASSERT_TRUE(
      p.parse(R"({"object":"error","message":"bad","type":"BadRequestError","code":400})").ok());
  ASSERT_TRUE(p.chunk().error);
  EXPECT_EQ(p.chunk().error->message, "bad");
  EXPECT_EQ(p.chunk().error->code, "400");
  ASSERT_TRUE(p.parse(R"({"error":"plain text"})").ok());
  EXPECT_EQ(p.chunk().error->message, "plain text");
}

TEST(OpenAiChunkTest, UpstreamCutlineObject) {
  ChunkParser p;
  ASSERT_TRUE(p.parse(R"({"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"length"}],
    "cutline":{"v":1,"cause":"backend_preempted","reporter":"backend","output_tokens":17}})")
                  .ok());
  ASSERT_TRUE(p.chunk().cutline);
  EXPECT_EQ(p.chunk().cutline->cause, Cause::kBackendPreempted);
  EXPECT_EQ(p.chunk().cutline->output_tokens, 17);
  auto bad = p.parse(R"({"cutline":{"v":1,"cause":"nope"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::kUpstream);
  EXPECT_NE(bad.error().message.find("upstream chunk: cutline stop record"), std::string::npos)
      << bad.error().message;
}

TEST(OpenAiChunkTest, MalformedChunksAreErrorsNamingTheField) {
  ChunkParser p;
  EXPECT_EQ(p.parse("{").error().message, "upstream chunk: not valid JSON");
  EXPECT_EQ(p.parse("[]").error().message, "upstream chunk: not a JSON object");
  EXPECT_EQ(p.parse(R"({"choices":{}})").error().message,
            "upstream chunk: choices must be an array");
  EXPECT_EQ(p.parse(R"({"choices":[{"delta":{"content":5}}]})").error().message,
            "upstream chunk: delta.content must be a string or null");
  EXPECT_EQ(p.parse(R"({"usage":{"completion_tokens":"x"}})").error().message,
            "upstream chunk: usage.completion_tokens must be an object of integers");
  // The parser recovers for the next chunk.
  EXPECT_TRUE(p.parse(R"({"choices":[{"delta":{"content":"ok"}}]})").ok());
  EXPECT_EQ(p.chunk().content(), "ok");
}

TEST(OpenAiChunkTest, SteadyStateKeepsChoiceStorage) {
  ChunkParser p;
  const std::string chunk =
      R"({"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok"},"finish_reason":null}]})";
  ASSERT_TRUE(p.parse(chunk).ok());
  const ChunkChoice* storage = p.chunk().choices.data();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(p.parse(chunk).ok());
  EXPECT_EQ(p.chunk().choices.data(), storage);
}

TEST(OpenAiResponseTest, ChatCompletionBody) {
  auto r = parse_completion_response(R"({"id":"chatcmpl-9","object":"chat.completion",
    "created":5,"model":"m","choices":[{"index":0,"message":{"role":"assistant",
    "content":"Hi!"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,
    "completion_tokens":2,"total_tokens":5},"cutline":{"v":1,"cause":"gateway_budget",
    "output_tokens":2}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->id, "chatcmpl-9");
  EXPECT_EQ(r->content, "Hi!");
  EXPECT_TRUE(r->has_content);
  EXPECT_EQ(r->role, "assistant");
  EXPECT_EQ(r->finish_reason, "length");
  EXPECT_EQ(r->choice_count, 1u);
  EXPECT_EQ(r->usage->total_tokens, 5);
  ASSERT_TRUE(r->cutline);
  EXPECT_EQ(r->cutline->cause, Cause::kGatewayBudget);
  EXPECT_FALSE(r->error);
}

TEST(OpenAiResponseTest, TextCompletionToolCallsAndErrors) {
  auto t = parse_completion_response(
      R"({"object":"text_completion","choices":[{"text":"abc","finish_reason":"stop"},{"text":"z"}]})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->content, "abc");
  EXPECT_EQ(t->choice_count, 2u);

  auto tools = parse_completion_response(
      R"({"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{}]},"finish_reason":"tool_calls"}]})");
  ASSERT_TRUE(tools.ok());
  EXPECT_FALSE(tools->has_content);
  EXPECT_TRUE(tools->has_tool_calls);

  auto err = parse_completion_response(R"({"error":{"message":"nope","type":"x","code":"c"}})");
  ASSERT_TRUE(err.ok());
  ASSERT_TRUE(err->error);
  EXPECT_EQ(err->error->message, "nope");
  EXPECT_EQ(err->error->code, "c");

  EXPECT_EQ(parse_completion_response("{\"a\":").error().message,
            "upstream response: is not valid JSON");
  EXPECT_EQ(parse_completion_response(R"({"choices":[{"message":{"content":1}}]})").error().message,
            "upstream response: message.content must be a string or null");
}

}  // namespace
}  // namespace cutline::proto
