#include "cutline/proto/wire/openai_request.h"

#include <gtest/gtest.h>

namespace cutline::proto {
namespace {

Result<ParsedRequest> chat(std::string_view body) {
  return parse_openai_request(body, Endpoint::kChatCompletions);
}
Result<ParsedRequest> completion(std::string_view body) {
  return parse_openai_request(body, Endpoint::kCompletions);
}

// The 400 message for `body`, or "" when it parses.
std::string chat_error(std::string_view body) {
  auto r = chat(body);
  if (r) return "";
  EXPECT_EQ(r.error().kind, ErrorKind::kBadRequest);
  return r.error().message;
}

TEST(OpenAiRequestTest, ParsesEveryChatField) {
  const std::string body = R"({
    "model": "llama-3.1-8b",
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi \u00e9 \ud83d\ude00"},
                                   {"type": "image_url", "image_url": {"url": "x"}},
                                   {"text": " there", "type": "text"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1"}]}
    ],
    "stream": true, "stream_options": {"include_usage": true, "other": [1, 2]},
    "max_tokens": 128, "max_completion_tokens": 64,
    "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
    "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
    "seed": 42, "stop": ["\n\n", "END"], "n": 2, "user": "u-1",
    "tools": [{"type": "function"}], "unknown": {"nested": [true, false, null, 1e5]}
  })";
  auto r = chat(body);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ParsedRequest& q = *r;
  EXPECT_EQ(q.model, "llama-3.1-8b");
  ASSERT_EQ(q.messages.size(), 3u);
  EXPECT_EQ(q.message_role(0), "system");
  EXPECT_EQ(q.message_text(0), "Be brief.");
  EXPECT_EQ(q.messages[1].content_kind, ChatMessage::ContentKind::kParts);
  EXPECT_TRUE(q.messages[1].has_non_text_parts);
  EXPECT_EQ(q.message_text(1), "Hi \xC3\xA9 \xF0\x9F\x98\x80 there");
  EXPECT_EQ(q.messages[2].content_kind, ChatMessage::ContentKind::kNull);
  EXPECT_TRUE(q.messages[2].has_tool_calls);
  EXPECT_EQ(q.message_text(2), "");
  EXPECT_TRUE(q.stream);
  EXPECT_TRUE(q.include_usage);
  EXPECT_EQ(q.max_tokens, 128);
  EXPECT_EQ(q.max_completion_tokens, 64);
  EXPECT_EQ(q.requested_max_tokens(), 64);
  EXPECT_DOUBLE_EQ(*q.temperature, 0.7);
  EXPECT_DOUBLE_EQ(*q.top_p, 0.9);
  EXPECT_EQ(q.top_k, 40);
  EXPECT_DOUBLE_EQ(*q.min_p, 0.05);
  EXPECT_DOUBLE_EQ(*q.presence_penalty, 0.5);
  EXPECT_DOUBLE_EQ(*q.frequency_penalty, -0.5);
  EXPECT_DOUBLE_EQ(*q.repetition_penalty, 1.1);
  EXPECT_EQ(q.seed, 42);
  EXPECT_EQ(q.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(q.n, 2);
  EXPECT_EQ(q.user, "u-1");
  EXPECT_TRUE(q.has_tools);
  // Anchors point at the exact value tokens.
  EXPECT_EQ(q.raw(*q.anchors.max_tokens), "128");
  EXPECT_EQ(q.raw(*q.anchors.max_completion_tokens), "64");
  EXPECT_EQ(q.raw(*q.anchors.stream), "true");
  EXPECT_EQ(q.raw(*q.anchors.include_usage), "true");
  EXPECT_EQ(body[*q.anchors.stream_options_open], '{');
  EXPECT_EQ(body[q.anchors.object_open], '{');
}

TEST(OpenAiRequestTest, MinimalChatHasDefaults) {
  auto r = chat(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->stream);
  EXPECT_FALSE(r->include_usage);
  EXPECT_FALSE(r->requested_max_tokens());
  EXPECT_EQ(r->n, 1);
  EXPECT_FALSE(r->anchors.stream);
  EXPECT_FALSE(r->anchors.max_tokens);
}

TEST(OpenAiRequestTest, CompletionPromptShapes) {
  auto s = completion(R"({"model":"m","prompt":"Once upon\ta time","max_tokens":null})");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->prompt_kind, PromptKind::kString);
  EXPECT_EQ(s->prompt_text(0), "Once upon\ta time");
  EXPECT_FALSE(s->max_tokens);
  EXPECT_EQ(s->raw(*s->anchors.max_tokens), "null");  // null is still a splice point

  auto a = completion(R"({"model":"m","prompt":["a","b"]})");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->prompt_kind, PromptKind::kStrings);
  ASSERT_EQ(a->prompts.size(), 2u);
  EXPECT_EQ(a->prompt_text(1), "b");

  auto t = completion(R"({"model":"m","prompt":[1,2,3]})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->prompt_kind, PromptKind::kTokens);
  EXPECT_EQ(t->prompt_tokens, (std::vector<int64_t>{1, 2, 3}));

  auto b = completion(R"({"model":"m","prompt":[[1,2],[3]]})");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->prompt_kind, PromptKind::kTokenBatches);

  auto mixed = completion(R"({"model":"m","prompt":["a",1]})");
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.error().message, "prompt must not mix strings, token ids and arrays (prompt[1])");
  EXPECT_EQ(completion(R"({"model":"m","prompt":[]})").error().message, "prompt must not be empty");
  EXPECT_EQ(completion(R"({"model":"m"})").error().message, "prompt is required");
}

TEST(OpenAiRequestTest, ErrorMessagesNameTheField) {
  EXPECT_EQ(chat_error(""), "request body is empty");
  EXPECT_EQ(chat_error("[1]"), "request body must be a JSON object");
  EXPECT_EQ(chat_error(R"({"messages":[{"role":"user","content":"x"}]})"), "model is required");
  EXPECT_EQ(chat_error(R"({"model":"m"})"), "messages is required");
  EXPECT_EQ(chat_error(R"({"model":"m","messages":[]})"), "messages must be a non-empty array");
  EXPECT_EQ(chat_error(R"({"model":"m","messages":{}})"), "messages must be an array, got object");
  EXPECT_EQ(chat_error(R"({"model":"m","messages":[{"content":"x"}]})"),
            "messages[0].role is required");
  EXPECT_EQ(chat_error(R"({"model":"m","messages":[{"role":"user","content":5}]})"),
            "messages[0].content must be a string, an array of parts or null, got number");
  EXPECT_EQ(chat_error(R"({"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]})"),
            "messages[0].content[0].text must be a string");
  EXPECT_EQ(chat_error(R"({"model":5,"messages":[{"role":"u"}]})"),
            "model must be a string, got number");
  EXPECT_EQ(chat_error(R"({"model":"","messages":[{"role":"u"}]})"),
            "model must be a non-empty string");

  const std::string msgs = R"(,"messages":[{"role":"user","content":"x"}]})";
  auto with = [&](std::string_view field) {
    return chat_error("{\"model\":\"m\"," + std::string(field) + msgs);
  };
  EXPECT_EQ(with(R"("max_tokens":-5)"), "max_tokens must be a positive integer, got -5");
  EXPECT_EQ(with(R"("max_tokens":0)"), "max_tokens must be a positive integer, got 0");
  EXPECT_EQ(with(R"("max_tokens":1.5)"), "max_tokens must be a positive integer, got 1.5");
  EXPECT_EQ(with(R"("max_tokens":"100")"), "max_tokens must be a positive integer, got string");
  EXPECT_EQ(with(R"("max_tokens":1000001)"), "max_tokens must be at most 1000000, got 1000001");
  EXPECT_EQ(with(R"("max_completion_tokens":99999999999999999999)"),
            "max_completion_tokens must be a positive integer, got 99999999999999999999");
  EXPECT_EQ(with(R"("stream":"yes")"), "stream must be a boolean, got string");
  EXPECT_EQ(with(R"("stream_options":[])"), "stream_options must be an object, got array");
  EXPECT_EQ(with(R"("stream_options":{"include_usage":1})"),
            "stream_options.include_usage must be a boolean, got number");
  EXPECT_EQ(with(R"("temperature":"hot")"), "temperature must be a number, got string");
  EXPECT_EQ(with(R"("temperature":-1)"), "temperature must be >= 0 and <= 100, got -1");
  EXPECT_EQ(with(R"("top_p":0)"), "top_p must be > 0 and <= 1, got 0");
  EXPECT_EQ(with(R"("top_k":-2)"), "top_k must be -1 (disabled) or >= 0, got -2");
  EXPECT_EQ(with(R"("seed":1.5)"), "seed must be an integer, got 1.5");
  EXPECT_EQ(with(R"("n":0)"), "n must be a positive integer, got 0");
  // n x max_tokens is what token pools reserve: n = 2^60 would make it wrap.
  EXPECT_EQ(with(R"("n":129)"), "n must be at most 128, got 129");
  EXPECT_EQ(with(R"("n":1152921504606846976)"), "n must be at most 128, got 1152921504606846976");
  EXPECT_EQ(with(R"("best_of":2305843009213693952)"),
            "best_of must be at most 128, got 2305843009213693952");
  EXPECT_EQ(with(R"("stop":[1])"), "stop[0] must be a string, got number");
  EXPECT_EQ(with(R"("stop":{})"), "stop must be a string or an array of strings, got object");
  EXPECT_EQ(with(R"("user":1)"), "user must be a string, got number");
  EXPECT_EQ(with(R"("max_tokens":5,"max_tokens":10)"), "duplicate key \"max_tokens\"");
  // An escaped key is the same key to every JSON parser upstream.
  EXPECT_EQ(with(R"("max_tokens":5,"max\u005ftokens":10)"), "duplicate key \"max_tokens\"");
}

TEST(OpenAiRequestTest, NullOptionalFieldsAreAbsent) {
  auto r = chat(R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":null,
    "seed":null,"stop":null,"user":null,"stream":null,"stream_options":null,"n":null})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->temperature);
  EXPECT_FALSE(r->seed);
  EXPECT_TRUE(r->stop.empty());
  EXPECT_FALSE(r->stream);
  EXPECT_EQ(r->raw(*r->anchors.stream_options), "null");
  EXPECT_EQ(r->n, 1);
}

TEST(OpenAiRequestTest, MalformedJsonAnywhereIsRejected) {
  const std::string head = R"({"model":"m","messages":[{"role":"user","content":"x"}])";
  EXPECT_NE(chat_error(head), "");  // unterminated object
  EXPECT_NE(chat_error(head + R"(,"extra":[1,,2]})"), "");
  EXPECT_NE(chat_error(head + R"(,"extra":{"a":tru}})"), "");
  EXPECT_NE(chat_error(head + R"(,"extra":01})"), "");
  EXPECT_NE(chat_error(head + R"(,"extra":"bad \x escape"})"), "");
  EXPECT_EQ(chat_error(head + "} {}"), "request body has bytes after the JSON object");
  EXPECT_EQ(chat_error(head + "}  \n"), "");
  EXPECT_EQ(chat_error(head + R"(,"extra":{"deep":[[[{"ok":1.5e-3}]]]}})"), "");
}

TEST(OpenAiRequestTest, InvalidUtf8IsRejected) {
  std::string body = R"({"model":"m","messages":[{"role":"user","content":"caf)";
  body += "\xC3\x28";  // an invalid two-byte sequence
  body += R"("}]})";
  EXPECT_EQ(chat_error(body), "request body is not valid UTF-8");
  std::string overlong = R"({"model":"m","messages":[{"role":"user","content":"x"}],"u":")";
  overlong += "\xC0\xAF\"}";
  EXPECT_EQ(chat_error(overlong), "request body is not valid UTF-8");
}

TEST(OpenAiRequestTest, ParserIsReusableAndInPlaceParsingKeepsOffsets) {
  RequestParser parser;
  std::string body = R"({"model":"a","messages":[{"role":"user","content":"one"}],"max_tokens":7})";
  auto first = parser.parse_in_place(body, Endpoint::kChatCompletions);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->body.data(), body.data());  // no copy
  EXPECT_EQ(first->raw(*first->anchors.max_tokens), "7");
  EXPECT_EQ(first->message_text(0), "one");
  std::string other = R"({"model":"b","messages":[{"role":"user","content":"two"}]})";
  auto second = parser.parse(other, Endpoint::kChatCompletions);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->model, "b");
  EXPECT_EQ(second->message_text(0), "two");
  EXPECT_EQ(second->body.data(), other.data());
}

}  // namespace
}  // namespace cutline::proto
