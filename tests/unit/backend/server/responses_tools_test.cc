// Function calling on /v1/responses: the request's tools and function_call items render the same
// prompt as the equivalent chat completions request, and the writer turns <tool_call> blocks in
// the output into function_call items, streamed in the API's event order.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cutline/proto/sse/sse_parser.h"
#include "cutline/server/completion_request.h"
#include "cutline/server/responses_request.h"
#include "cutline/server/responses_writer.h"
#include "writer_test_support.h"

namespace cutline::server {
namespace {

using test::ByteTokenizer;
using test::events_of;
using test::RecordingStream;

std::string rendered_responses(const std::string& body, model::ChatTemplateKind kind) {
  RequestErrorDetail d;
  auto r = parse_responses_request(body, d);
  EXPECT_TRUE(r.ok()) << r.error().message;
  if (!r.ok()) return "";
  model::ChatRenderOptions o;
  o.tools = r->tools.tools;
  auto chat = model::render_chat(kind, r->messages, o);
  EXPECT_TRUE(chat.ok()) << chat.error().message;
  return chat.ok() ? chat->text() : "";
}

std::string rendered_chat(const std::string& body, model::ChatTemplateKind kind) {
  auto parsed = proto::parse_openai_request(body, proto::Endpoint::kChatCompletions);
  EXPECT_TRUE(parsed.ok());
  RequestErrorDetail d;
  auto chat = render_chat_request(*parsed, kind, nullptr, d);
  EXPECT_TRUE(chat.ok()) << chat.error().message;
  return chat.ok() ? chat->text() : "";
}

TEST(ResponsesTools, RenderTheSamePromptAsChatCompletions) {
  const std::string responses =
      R"({"model":"m","instructions":"Be brief.","tools":[{"type":"function","name":"get_weather",)"
      R"("description":"Weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}}},)"
      R"("strict":false}],"input":[{"role":"user","content":"Paris and Rome?"},)"
      R"({"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},)"
      R"({"type":"function_call","call_id":"c2","name":"get_weather","arguments":"{\"city\":\"Rome\"}"},)"
      R"({"type":"function_call_output","call_id":"c1","output":"18C"},)"
      R"({"type":"function_call_output","call_id":"c2","output":"25C"}]})";
  const std::string chat =
      R"({"model":"m","tools":[{"type":"function","function":{"name":"get_weather",)"
      R"("description":"Weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],)"
      R"("messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Paris and Rome?"},)"
      R"({"role":"assistant","content":null,"tool_calls":[)"
      R"({"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},)"
      R"({"id":"c2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},)"
      R"({"role":"tool","tool_call_id":"c1","content":"18C"},{"role":"tool","tool_call_id":"c2","content":"25C"}]})";
  for (auto kind : {model::ChatTemplateKind::kQwen25, model::ChatTemplateKind::kQwen3}) {
    const std::string want = rendered_chat(chat, kind);
    EXPECT_NE(want.find("<tool_response>\n25C\n</tool_response>"), std::string::npos) << want;
    EXPECT_EQ(rendered_responses(responses, kind), want);
  }
}

TEST(ResponsesTools, RefusalsNameTheField) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"model":"m","input":"x","tools":[{"type":"web_search"}]})", "tools[0].type"},
      {R"({"model":"m","input":"x","tools":[{"type":"function","name":"f"}],)"
       R"("tool_choice":{"type":"function","name":"g"}})",
       "tool_choice"},
      {R"({"model":"m","input":"x","tool_choice":"required"})", "tool_choice"},
      {R"({"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{"}]})",
       "input"},
      {R"({"model":"m","input":[{"type":"function_call_output","call_id":"c","output":5}]})",
       "input"},
  };
  for (const auto& [body, param] : cases) {
    RequestErrorDetail d;
    auto r = parse_responses_request(body, d);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().status(), 400);
    EXPECT_EQ(d.param, param) << body;
  }
}

std::string run_writer(bool stream, const std::string& text) {
  ResponsesParams p;
  p.id = "resp_1";
  p.item_id = "msg_1";
  p.model = "m";
  p.stream = stream;
  p.tools.parse = true;
  p.make_call_id = [] { return std::string("call_abc"); };
  ByteTokenizer tok;
  RecordingStream http;
  ResponsesWriter w(std::move(p), tok);
  w.start(http);
  for (size_t i = 0; i < text.size(); i += 7) w.text(http, text.substr(i, 7), {});
  proto::StopRecord stop;
  stop.cause = proto::Cause::kEos;
  engine::SequenceRecord rec;
  w.finish(http, stop, rec);
  return http.body_;
}

const std::string kOutput =
    "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}\n</tool_call>";

TEST(ResponsesTools, CallsAreFunctionCallItemsInTheApisEventOrder) {
  const auto events = events_of(run_writer(true, kOutput));
  std::vector<std::string> types;  // consecutive text deltas counted once
  std::string deltas;
  for (const auto& e : events) {
    if (e.first == "response.output_text.delta") {
      const size_t at = e.second.find(R"("delta":")") + 9;
      deltas += e.second.substr(at, e.second.find('"', at) - at);
      if (types.back() == e.first) continue;
    }
    types.push_back(e.first);
  }
  const std::vector<std::string> want = {"response.created",
                                         "response.in_progress",
                                         "response.output_item.added",
                                         "response.content_part.added",
                                         "response.output_text.delta",
                                         "response.output_text.done",
                                         "response.content_part.done",
                                         "response.output_item.done",
                                         "response.output_item.added",
                                         "response.function_call_arguments.delta",
                                         "response.function_call_arguments.done",
                                         "response.output_item.done",
                                         "response.completed"};
  ASSERT_EQ(types, want);
  EXPECT_EQ(deltas, "Checking.");
  const size_t n = events.size();
  EXPECT_NE(
      events[n - 5].second.find(R"("output_index":1,"item":{"id":"fc_abc",)"
                                R"("type":"function_call","status":"in_progress",)"
                                R"("call_id":"call_abc","name":"get_weather","arguments":""})"),
      std::string::npos)
      << events[n - 5].second;
  EXPECT_NE(events[n - 3].second.find(R"("arguments":"{\"city\":\"Paris\"}")"), std::string::npos);
  for (size_t i = 0; i < n; ++i)
    EXPECT_NE(events[i].second.find("\"sequence_number\":" + std::to_string(i)), std::string::npos);
  const std::string& done = events.back().second;
  EXPECT_NE(done.find(R"("text":"Checking.")"), std::string::npos) << done;
  EXPECT_NE(done.find(R"({"id":"fc_abc","type":"function_call","status":"completed",)"
                      R"("call_id":"call_abc","name":"get_weather",)"
                      R"("arguments":"{\"city\":\"Paris\"}"})"),
            std::string::npos)
      << done;
}

TEST(ResponsesTools, WholeResponseListsTheCallAfterTheMessage) {
  const std::string body = run_writer(false, kOutput);
  EXPECT_NE(body.find(R"("status":"completed")"), std::string::npos);
  EXPECT_NE(
      body.find(R"("text":"Checking.","annotations":[]}]},{"id":"fc_abc","type":"function_call")"),
      std::string::npos)
      << body;
  const std::string malformed = run_writer(false, "<tool_call>{nope}</tool_call>");
  EXPECT_EQ(malformed.find("function_call"), std::string::npos);
  EXPECT_NE(malformed.find(R"("text":"<tool_call>{nope}</tool_call>")"), std::string::npos)
      << malformed;
}

}  // namespace
}  // namespace cutline::server
