#include "cutline/server/responses_request.h"

#include <gtest/gtest.h>

#include "cutline/server/response_object.h"

namespace cutline::server {
namespace {

Result<ResponsesRequest> parse(const std::string& body, RequestErrorDetail& detail) {
  return parse_responses_request(body, detail);
}

TEST(ResponsesRequest, StringInputIsOneUserMessageAfterTheInstructions) {
  RequestErrorDetail d;
  auto r = parse(R"({"model":"m","input":"Hi","instructions":"Be kind","max_output_tokens":9,)"
                 R"("temperature":0.5,"top_p":0.9,"stream":true,"store":false,"metadata":{}})",
                 d);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->model, "m");
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[0].content, "Be kind");
  EXPECT_EQ(r->messages[1].role, "user");
  EXPECT_EQ(r->messages[1].content, "Hi");
  EXPECT_EQ(r->instructions, "Be kind");
  EXPECT_EQ(r->max_output_tokens, 9);
  EXPECT_EQ(r->temperature, 0.5);
  EXPECT_EQ(r->top_p, 0.9);
  EXPECT_TRUE(r->stream);
  EXPECT_EQ(r->top_logprobs, -1);
}

TEST(ResponsesRequest, MessageListWithTextPartsAndDeveloperRole) {
  RequestErrorDetail d;
  auto r = parse(R"({"model":"m","input":[{"role":"developer","content":"Rules"},)"
                 R"({"type":"message","role":"user","content":[{"type":"input_text","text":"a"},)"
                 R"({"type":"input_text","text":"b"}]},)"
                 R"({"role":"assistant","content":[{"type":"output_text","text":"c"}]}],)"
                 R"("include":["message.output_text.logprobs"]})",
                 d);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->messages.size(), 3u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[1].content, "ab");
  EXPECT_EQ(r->messages[2].role, "assistant");
  EXPECT_EQ(r->top_logprobs, 0);  // include asks for the sampled tokens' logprobs
  EXPECT_FALSE(r->max_output_tokens.has_value());
}

TEST(ResponsesRequest, RefusalsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"input":"x"})", "model"},
      {R"({"model":"m"})", "input"},
      {R"({"model":"m","input":null})", "input"},
      {R"({"model":"m","input":[{"role":"user","content":[{"type":"input_file"}]}]})", "input"},
      {R"({"model":"m","input":[{"type":"reasoning","summary":[]}]})", "input"},
      {R"({"model":"m","input":"x","max_output_tokens":-1})", "max_output_tokens"},
      {R"({"model":"m","input":"x","max_output_tokens":1e3})", "max_output_tokens"},
      {R"({"model":"m","input":"x","top_logprobs":-1})", "top_logprobs"},
      {R"({"model":"m","input":"x","include":"all"})", "include"},
      {R"({"model":"m","input":"x","seed":"s"})", "seed"},
  };
  for (const auto& [body, param] : cases) {
    RequestErrorDetail d;
    auto r = parse(body, d);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(d.param, param) << body << ": " << r.error().message;
    EXPECT_EQ(r.error().status(), 400) << body;
  }
  RequestErrorDetail d;
  auto bad = parse("{\"model\":\"m\",\"input\":\"\xc3\"}", d);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("UTF-8"), std::string::npos);
}

TEST(ResponseOutcome, ModelStopsCompleteLimitsAreIncompleteFailuresFail) {
  using proto::Cause;
  EXPECT_EQ(response_outcome(Cause::kEos, false).status, "completed");
  EXPECT_EQ(response_outcome(Cause::kStopSequence, false).status, "completed");
  const ResponseOutcome max = response_outcome(Cause::kClientMaxTokens, false);
  EXPECT_EQ(max.status, "incomplete");
  EXPECT_EQ(max.incomplete_reason, "max_output_tokens");
  EXPECT_EQ(response_outcome(Cause::kContextLength, false).incomplete_reason, "max_output_tokens");
  EXPECT_EQ(response_outcome(Cause::kGatewayBudget, false).incomplete_reason, "max_output_tokens");
  const ResponseOutcome cancel = response_outcome(Cause::kBackendPreempted, false);
  EXPECT_EQ(cancel.status, "incomplete");
  EXPECT_FALSE(cancel.incomplete_reason.has_value());
  EXPECT_EQ(response_outcome(Cause::kUpstreamError, true).status, "failed");
}

TEST(ResponseObject, FinalObjectCarriesOutputUsageAndRecord) {
  std::string json;
  base::JsonWriter w(json);
  ResponseObjectFields f;
  f.id = "resp_1";
  f.created_at = 1700000000;
  f.model = "m";
  f.status = "incomplete";
  f.incomplete_reason = "max_output_tokens";
  f.item_id = "msg_1";
  const std::string text = "hello";
  f.text = &text;
  ResponseUsage usage{5, 2, 3};
  f.usage = &usage;
  proto::StopRecord rec;
  rec.cause = proto::Cause::kClientMaxTokens;
  f.cutline = &rec;
  write_response_object(w, f);
  EXPECT_NE(json.find(R"("object":"response")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("incomplete_details":{"reason":"max_output_tokens"})"), std::string::npos);
  EXPECT_NE(json.find(R"("output":[{"id":"msg_1","type":"message","status":"incomplete",)"
                      R"("role":"assistant","content":[{"type":"output_text","text":"hello",)"
                      R"("annotations":[]}]}])"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("input_tokens":5,"input_tokens_details":{"cached_tokens":2},)"
                      R"("output_tokens":3)"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("total_tokens":8)"), std::string::npos);
  EXPECT_NE(json.find(R"("cutline":{"v":1)"), std::string::npos) << json;
}

}  // namespace
}  // namespace cutline::server
