// Tool calling end to end: the real cutline-backend serving the built-in tiny model with a
// Qwen2.5 template (--chat-template qwen2.5) answers OpenAI tool requests with well-formed
// responses, and the same model with its own ChatML template refuses tools by name. The tiny
// model's words are random, so what is checked is the shape and the stop bookkeeping; the parsing
// of real <tool_call> output is covered by the writer's unit tests.

#include <gtest/gtest.h>

#include "backend_harness.h"
#include "cutline/proto/wire/completion_assembler.h"

namespace cutline::test {
namespace {

const std::string kTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","description":"Weather.",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])";

const std::string kConversation =
    R"("messages":[{"role":"user","content":"Weather in Paris?"},)"
    R"({"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",)"
    R"("function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},)"
    R"({"role":"tool","tool_call_id":"call_1","content":"18C"}])";

std::string request(const std::string& extra) {
  return R"({"model":"tiny",)" + kTools + "," + kConversation + R"(,"max_tokens":10,"seed":3)" +
         extra + "}";
}

class BackendTools : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    qwen_ = new Backend();
    ASSERT_TRUE(qwen_->start({"--model", "tiny=builtin", "--chat-template", "qwen2.5"}))
        << qwen_->stderr_text();
    chatml_ = new Backend();
    ASSERT_TRUE(chatml_->start({"--model", "tiny=builtin"})) << chatml_->stderr_text();
  }
  static void TearDownTestSuite() {
    delete qwen_;
    delete chatml_;
    qwen_ = chatml_ = nullptr;
  }
  static Backend* qwen_;
  static Backend* chatml_;
};
Backend* BackendTools::qwen_ = nullptr;
Backend* BackendTools::chatml_ = nullptr;

TEST_F(BackendTools, ConversationWithToolCallsAndResultsIsServed) {
  auto r = qwen_->post("/v1/chat/completions", request(""));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json_string(r->body, "/object"), "chat.completion");
  EXPECT_EQ(json_string(r->body, "/choices/0/message/role"), "assistant");
  const std::string finish = json_string(r->body, "/choices/0/finish_reason");
  auto rec = cutline_of(r->body);
  ASSERT_TRUE(rec.has_value()) << r->body;
  // Random words: either the model stopped (stop, or tool_calls if it wrote a call) or the
  // 10-token limit did; the record says which, and the finish_reason agrees with it.
  if (rec->cause == proto::Cause::kClientMaxTokens) {
    EXPECT_EQ(finish, "length");
  } else {
    EXPECT_EQ(rec->cause, proto::Cause::kEos);
    EXPECT_TRUE(finish == "stop" || finish == "tool_calls") << finish;
  }
}

TEST_F(BackendTools, RequiredToolChoiceStreamsWellFormedChunks) {
  auto r =
      qwen_->post("/v1/chat/completions", request(R"(,"tool_choice":"required","stream":true)"));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  bool done = false;
  const auto chunks = sse_payloads(r->body, &done);
  EXPECT_TRUE(done);
  proto::CompletionAssembler assembler;
  for (const std::string& c : chunks) ASSERT_TRUE(assembler.add(c).ok()) << c;
  ASSERT_EQ(assembler.choices().size(), 1u);
  const proto::AssembledChoice& choice = assembler.choices()[0];
  auto rec = cutline_of(chunks.back());
  ASSERT_TRUE(rec.has_value());
  if (choice.tool_calls.empty()) {
    // The forced "<tool_call>\n" opening and the model's unfinished call come back as text.
    EXPECT_TRUE(choice.content.starts_with("<tool_call>\n")) << choice.content;
    EXPECT_NE(choice.finish_reason, "tool_calls");
  } else {
    EXPECT_EQ(choice.finish_reason, "tool_calls");
    EXPECT_TRUE(choice.tool_calls[0].id.starts_with("call_"));
  }
  if (rec->cause == proto::Cause::kClientMaxTokens) {
    EXPECT_EQ(choice.finish_reason, "length");
  } else {
    EXPECT_EQ(rec->cause, proto::Cause::kEos);
  }
}

TEST_F(BackendTools, WhatCannotBeHonouredIs400NamingTheField) {
  auto unknown = qwen_->post(
      "/v1/chat/completions",
      request(R"(,"tool_choice":{"type":"function","function":{"name":"send_email"}})"));
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->status, 400) << unknown->body;
  EXPECT_EQ(json_string(unknown->body, "/error/param"), "tool_choice");

  auto no_syntax = chatml_->post("/v1/chat/completions", request(""));
  ASSERT_TRUE(no_syntax.ok());
  EXPECT_EQ(no_syntax->status, 400) << no_syntax->body;
  EXPECT_EQ(json_string(no_syntax->body, "/error/param"), "tools");
  EXPECT_NE(json_string(no_syntax->body, "/error/message").find("model 'tiny' has no tool calling"),
            std::string::npos)
      << no_syntax->body;

  // Without tool syntax, tool_choice "none" with a plain conversation is served as chat.
  auto none = chatml_->post(
      "/v1/chat/completions",
      R"({"model":"tiny",)" + kTools +
          R"(,"tool_choice":"none","messages":[{"role":"user","content":"hi"}],"max_tokens":3})");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->status, 200) << none->body;
}

TEST_F(BackendTools, ResponsesApiServesFunctionCalling) {
  const std::string body =
      R"({"model":"tiny","tools":[{"type":"function","name":"get_weather","parameters":{}}],)"
      R"("input":[{"role":"user","content":"Weather?"},)"
      R"({"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{}"},)"
      R"({"type":"function_call_output","call_id":"c1","output":"18C"}],)"
      R"("max_output_tokens":8,"seed":5)";
  auto whole = qwen_->post("/v1/responses", body + "}");
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(whole->status, 200) << whole->body;
  EXPECT_EQ(json_string(whole->body, "/object"), "response");
  EXPECT_EQ(json_string(whole->body, "/output/0/type"), "message");
  auto streamed =
      qwen_->post("/v1/responses", body + R"(,"tool_choice":"required","stream":true})");
  ASSERT_TRUE(streamed.ok());
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  const auto frames = sse_payloads(streamed->body);
  ASSERT_FALSE(frames.empty());
  const std::string last = json_string(frames.back(), "/type");
  EXPECT_TRUE(last == "response.completed" || last == "response.incomplete") << last;

  auto refused = chatml_->post("/v1/responses", body + "}");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 400) << refused->body;
  EXPECT_EQ(json_string(refused->body, "/error/param"), "tools");
}

}  // namespace
}  // namespace cutline::test
