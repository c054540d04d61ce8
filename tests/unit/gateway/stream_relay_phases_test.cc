// Stream's route, relay and finish phases against a scripted upstream (no socket): what the
// upstream sends reaches the client with one stop record that names why the answer ended. The
// end-to-end versions are in tests/integration/gateway_stop_causes_test.cc.
#include <gtest/gtest.h>

#include "cutline/proto/wire/openai_error.h"
#include "cutline/proto/wire/stop_record.h"
#include "stream_fakes.h"

namespace cutline::gateway::test {
namespace {

using proto::Cause;

constexpr const char* kPolicy =
    "listen:\n  - address: 127.0.0.1:0\n"
    "upstreams:\n  - name: up\n    url: http://127.0.0.1:9\n    models: [\"m\"]\n"
    "policies:\n"
    "  - name: budget\n    match: {headers: {x-policy: budget}}\n"
    "    budget: {max_output_tokens: 4}\n"
    "  - name: ttft\n    match: {headers: {x-policy: ttft}}\n"
    "    ttft_timeout: 30ms\n    on_cut: {mode: error}\n"
    "  - name: default\n    match: {}\n";

// One chat.completion.chunk event with `delta` and `finish_reason` (JSON values).
std::string chunk(std::string_view delta, std::string_view finish_reason = "null") {
  return R"(data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",)"
         R"("choices":[{"index":0,"delta":)" +
         std::string(delta) + R"(,"finish_reason":)" + std::string(finish_reason) + "}]}\n\n";
}

std::string usage_chunk(int prompt, int completion) {
  return R"(data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",)"
         R"("choices":[],"usage":{"prompt_tokens":)" +
         std::to_string(prompt) + R"(,"completion_tokens":)" + std::to_string(completion) +
         R"(,"total_tokens":)" + std::to_string(prompt + completion) + "}}\n\n";
}

class StreamRelayPhases : public PhaseTest {
 protected:
  StreamRelayPhases() : PhaseTest(kPolicy) {}

  // Plays the upstream's answer to call `i`: `status`, then `pieces` of body, then the end.
  void answer(size_t i, int status, std::string_view content_type,
              const std::vector<std::string>& pieces) {
    ASSERT_LT(i, upstream_->calls.size());
    proto::ClientCallbacks& cb = upstream_->calls[i].callbacks;
    proto::HttpHeaders head{{"Content-Type", content_type}};
    cb.on_head(status, head);
    for (const std::string& p : pieces) {
      host_.clock_.advance_ms(10);
      cb.on_body(p);
    }
    proto::HttpHeaders trailers;
    cb.on_complete(trailers);
  }
};

TEST_F(StreamRelayPhases, ToolCallsFinishReasonPassesThroughAsEos) {
  auto s =
      start(Route::kChatCompletions,
            R"({"model":"m","messages":[{"role":"user","content":"weather?"}],"stream":true})");
  ASSERT_EQ(upstream_->calls.size(), 1u);
  const proto::ClientRequest& sent = upstream_->calls[0].request;
  EXPECT_EQ(sent.target, "/v1/chat/completions");
  EXPECT_NE(sent.body.find("\"include_usage\":true"), std::string::npos) << sent.body;
  EXPECT_EQ(s.stream->phase(), Phase::kRoute);

  answer(0, 200, "text/event-stream",
         {chunk(R"({"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1",)"
                R"("type":"function","function":{"name":"weather","arguments":""}}]})"),
          chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]})"),
          chunk("{}", "\"tool_calls\""), usage_chunk(9, 12), "data: [DONE]\n\n"});

  ASSERT_TRUE(s.client->answered());
  EXPECT_EQ(s.client->status(), 200);
  const std::string& body = s.client->body();
  EXPECT_NE(body.find("\"finish_reason\":\"tool_calls\""), std::string::npos) << body;
  EXPECT_NE(body.find(R"(\"city\":\"Paris\")"), std::string::npos) << body;
  EXPECT_EQ(count_of(body, "\"cutline\":{"), 1u) << body;
  EXPECT_EQ(count_of(body, "data: [DONE]"), 1u);
  auto trailer = proto::parse_stop_header(s.client->trailers().get("cutline-stop").value_or(""));
  ASSERT_TRUE(trailer.ok());
  EXPECT_EQ(trailer->cause, Cause::kEos);
  EXPECT_EQ(trailer->output_tokens, 12);
  EXPECT_EQ(trailer->count_method, proto::CountMethod::kUsage);

  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"cause\":\"eos\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"upstream\":\"up\""), std::string::npos) << lines[0];
  EXPECT_NE(metrics().find("cutline_stops_total{cause=\"eos\""), std::string::npos);
}

// The upstream's members byte for byte (its codes reach the client) and the gateway's record,
// in the body as in the header.
TEST_F(StreamRelayPhases, AnUpstream4xxBodyKeepsItsMembersAndCarriesTheRecord) {
  auto s = start(Route::kChatCompletions,
                 R"({"model":"m","messages":[{"role":"user","content":"long"}],"stream":true})");
  const std::string error =
      R"({"error":{"message":"This model's maximum context length is 8 tokens",)"
      R"("type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})";
  answer(0, 400, "application/json", {error.substr(0, 20), error.substr(20)});

  ASSERT_TRUE(s.client->answered());
  EXPECT_EQ(s.client->status(), 400);
  const std::string body = s.client->body();
  const std::string members =
      R"("message":"This model's maximum context length is 8 tokens",)"
      R"("type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}})";
  EXPECT_EQ(body.rfind(R"({"error":{"cutline":{"v":1,"cause":"upstream_error",)", 0), 0u) << body;
  ASSERT_GT(body.size(), members.size());
  EXPECT_EQ(body.substr(body.size() - members.size()), members) << body;
  EXPECT_EQ(body.find("\"cutline\":"), body.rfind("\"cutline\":")) << body;
  auto in_body = proto::parse_error_body(body);
  ASSERT_TRUE(in_body.ok() && in_body->cutline) << body;
  EXPECT_EQ(in_body->cutline->cause, Cause::kUpstreamError);
  EXPECT_EQ(in_body->cutline->rule, "upstreams.up");
  EXPECT_EQ(s.client->headers().get("Content-Type").value_or(""), "application/json");
  auto rec = proto::parse_stop_header(s.client->headers().get("Cutline-Stop").value_or(""));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->cause, Cause::kUpstreamError);
  EXPECT_EQ(rec->rule, "upstreams.up");

  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"cause\":\"upstream_error\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"status\":400"), std::string::npos) << lines[0];
  EXPECT_NE(metrics().find("cutline_upstream_errors_total{kind=\"status_400\""), std::string::npos);
}

TEST_F(StreamRelayPhases, TheTokenBudgetClampIsLabeledBudget) {
  auto s = start(Route::kChatCompletions,
                 R"({"model":"m","messages":[{"role":"user","content":"count"}],"max_tokens":100})",
                 {{"Content-Type", "application/json"}, {"X-Policy", "budget"}});
  ASSERT_EQ(upstream_->calls.size(), 1u);
  const std::string& sent = upstream_->calls[0].request.body;
  EXPECT_NE(sent.find("\"max_tokens\":4"), std::string::npos) << sent;  // clamped
  EXPECT_NE(sent.find("\"stream\":true"), std::string::npos) << sent;   // relayed as a stream

  answer(0, 200, "text/event-stream",
         {chunk(R"({"role":"assistant","content":"one"})"), chunk(R"({"content":" two"})"),
          chunk(R"({"content":" three"})"), chunk(R"({"content":" four"})"),
          chunk("{}", "\"length\""), usage_chunk(5, 4), "data: [DONE]\n\n"});

  ASSERT_TRUE(s.client->answered());
  EXPECT_EQ(s.client->status(), 200);
  // Not streamed: one assembled completion, the record in it and in the header.
  EXPECT_NE(s.client->body().find("\"content\":\"one two three four\""), std::string::npos)
      << s.client->body();
  EXPECT_NE(s.client->body().find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_EQ(count_of(s.client->body(), "\"cutline\":{"), 1u);
  auto rec = proto::parse_stop_header(s.client->headers().get("Cutline-Stop").value_or(""));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->cause, Cause::kGatewayBudget);
  EXPECT_EQ(rec->rule, "policies[0].budget.max_output_tokens");
  EXPECT_EQ(rec->limit, 4.0);
  EXPECT_EQ(rec->observed, 4.0);
  // The body's record is the whole one.
  const std::string& body = s.client->body();
  EXPECT_NE(body.find("\"requested_max_tokens\":100"), std::string::npos) << body;
  EXPECT_NE(body.find("\"effective_max_tokens\":4"), std::string::npos) << body;
  EXPECT_NE(body.find("\"ttft_ms\":10,"), std::string::npos) << body;  // the ManualClock's 10 ms

  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"cause\":\"gateway_budget\""), std::string::npos) << lines[0];
  EXPECT_NE(metrics().find(
                "cutline_budget_clamped_total{rule=\"policies[0].budget.max_output_tokens\"} 1"),
            std::string::npos);
}

TEST_F(StreamRelayPhases, AnUpstreamThatClosesMidStreamIsAnUpstreamDisconnect) {
  auto s = start(Route::kChatCompletions,
                 R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true})");
  proto::ClientCallbacks& cb = upstream_->calls.at(0).callbacks;
  proto::HttpHeaders head{{"Content-Type", "text/event-stream"}};
  cb.on_head(200, head);
  cb.on_body(chunk(R"({"role":"assistant","content":"par"})"));
  cb.on_error(proto::ClientError{proto::ClientErrorKind::kClosedMidBody, "reset by peer"});

  ASSERT_TRUE(s.client->answered());
  EXPECT_NE(s.client->body().find("\"content\":\"par\""), std::string::npos);
  EXPECT_EQ(count_of(s.client->body(), "\"cutline\":{"), 1u) << s.client->body();
  // A failed stream's end (an error event with the record), never a finish_reason.
  EXPECT_NE(s.client->body().find("event: error\n"), std::string::npos) << s.client->body();
  EXPECT_EQ(s.client->body().find("\"finish_reason\":\"length\""), std::string::npos);
  auto rec = proto::parse_stop_header(s.client->trailers().get("cutline-stop").value_or(""));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->cause, Cause::kUpstreamDisconnect);
  EXPECT_EQ(host_.log_lines().size(), 1u);
}

TEST_F(StreamRelayPhases, TheTtftTimerInErrorModeIsA504BeforeAnyByte) {
  auto s = start(Route::kChatCompletions,
                 R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true})",
                 {{"Content-Type", "application/json"}, {"X-Policy", "ttft"}});
  ASSERT_EQ(upstream_->calls.size(), 1u);
  host_.clock_.advance_ms(35);  // what the record measures; the timer waits 30 ms of real time
  ASSERT_TRUE(run_until([&] { return s.client->answered(); }));
  EXPECT_EQ(s.client->status(), 504);
  EXPECT_EQ(count_of(s.client->body(), "\"cutline\":{"), 1u) << s.client->body();
  auto rec = proto::parse_stop_header(s.client->headers().get("Cutline-Stop").value_or(""));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->cause, Cause::kGatewayTtftTimeout);
  EXPECT_EQ(rec->rule, "policies[1].ttft_timeout");
  EXPECT_EQ(rec->limit, 30.0);
  EXPECT_EQ(rec->observed, 35.0);
  // Ended once, its one log line written.
  EXPECT_EQ(s.stream->phase(), Phase::kDone);
  EXPECT_EQ(s.client->ends(), 1);
  EXPECT_EQ(host_.log_lines().size(), 1u);
}

// The client leaves mid-stream, and the upstream's reset of the same moment is delivered after
// it: the first end event wins (client_cancel), the second writes nothing.
TEST_F(StreamRelayPhases, FinishRunsOnceWhenAnUpstreamErrorRacesTheClientsCancel) {
  auto s = start(Route::kChatCompletions,
                 R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true})");
  proto::ClientCallbacks& cb = upstream_->calls.at(0).callbacks;
  proto::HttpHeaders head{{"Content-Type", "text/event-stream"}};
  cb.on_head(200, head);
  cb.on_body(chunk(R"({"role":"assistant","content":"par"})"));
  s.client->hang_up();
  EXPECT_EQ(s.stream->phase(), Phase::kDone);
  cb.on_error(proto::ClientError{proto::ClientErrorKind::kClosedMidBody, "reset by peer"});

  EXPECT_EQ(s.client->ends(), 0);
  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"cause\":\"client_cancel\""), std::string::npos) << lines[0];
  EXPECT_EQ(metric_sum(metrics(), "cutline_stops_total{"), 1.0);
}

}  // namespace
}  // namespace cutline::gateway::test
