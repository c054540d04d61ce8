#include "cutline/gateway/responses_relay.h"

#include "support/count_of.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace cutline::gateway {
namespace {

using ::cutline::test::count_of;

// A Responses stream as a Cutline backend sends it: the terminal event's response carries the
// backend's own record (client_max_tokens: from its side, the clamped limit was the client's).
const std::string kBackendStream =
    "event: response.created\n"
    "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\","
    "\"object\":\"response\",\"created_at\":1,\"status\":\"in_progress\",\"model\":\"tiny\","
    "\"output\":[]}}\n\n"
    "event: response.output_text.delta\n"
    "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"Once\"}\n\n"
    "event: response.incomplete\n"
    "data: {\"type\":\"response.incomplete\",\"sequence_number\":2,\"response\":{\"id\":"
    "\"resp_1\",\"object\":\"response\",\"created_at\":1,\"status\":\"incomplete\",\"model\":"
    "\"tiny\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"usage\":{"
    "\"input_tokens\":5,\"output_tokens\":1,\"total_tokens\":6},\"cutline\":{\"v\":1,\"cause\":"
    "\"client_max_tokens\",\"origin\":\"client\",\"truncated\":false,\"reporter\":\"backend\"},"
    "\"text\":{\"format\":{\"type\":\"text\"}}}}\n\n";

proto::StopRecord budget_record() {
  proto::StopRecord r;
  r.cause = proto::Cause::kGatewayBudget;
  r.reporter = "gateway";
  r.upstream_cause = proto::Cause::kClientMaxTokens;
  return r;
}

std::string relay_to_end(bool client_stream) {
  ResponsesRelay relay(ResponsesRelayOptions{client_stream, "x", "tiny"});
  TokenTiming timing;
  std::string out;
  auto fed = relay.feed(kBackendStream, 1000, timing, out);
  EXPECT_TRUE(fed.ok());
  EXPECT_TRUE(fed.ok() && fed->ended);
  EXPECT_TRUE(relay.has_terminal());
  // The backend's record is read for its facts before the gateway's replaces it.
  EXPECT_TRUE(relay.backend_record() != nullptr &&
              relay.backend_record()->cause == proto::Cause::kClientMaxTokens &&
              relay.backend_record()->reporter == "backend");
  relay.write_end(budget_record(), /*gateway_cut=*/false, out);
  return out;
}

TEST(ResponsesRelay, TheGatewaysRecordReplacesTheUpstreamsInTheFinalObject) {
  const std::string body = relay_to_end(/*client_stream=*/false);
  EXPECT_EQ(body.front(), '{') << body;
  EXPECT_EQ(body.back(), '}') << body;
  EXPECT_EQ(count_of(body, "\"cutline\":"), 1u) << body;
  EXPECT_NE(body.find("\"cause\":\"gateway_budget\""), std::string::npos) << body;
  EXPECT_EQ(body.find("\"reporter\":\"backend\""), std::string::npos) << body;
  // The rest of the upstream's object is kept as sent, members after the record included.
  EXPECT_NE(body.find("\"text\":{\"format\":{\"type\":\"text\"}}}"), std::string::npos) << body;
  EXPECT_NE(body.find("\"incomplete_details\":{\"reason\":\"max_output_tokens\"}"),
            std::string::npos)
      << body;
}

TEST(ResponsesRelay, TheGatewaysRecordReplacesTheUpstreamsInTheTerminalEvent) {
  const std::string sse = relay_to_end(/*client_stream=*/true);
  const size_t last = sse.rfind("event: ");
  ASSERT_NE(last, std::string::npos) << sse;
  const std::string terminal = sse.substr(last);
  EXPECT_EQ(terminal.rfind("event: response.incomplete\n", 0), 0u) << terminal;
  EXPECT_EQ(count_of(sse, "\"cutline\":"), 1u) << sse;
  EXPECT_NE(terminal.find("\"cause\":\"gateway_budget\""), std::string::npos) << terminal;
  EXPECT_EQ(sse.find("client_max_tokens\",\"origin\""), std::string::npos) << sse;
  EXPECT_NE(terminal.find("\"text\":{\"format\":{\"type\":\"text\"}}}}"), std::string::npos)
      << terminal;
}

TEST(ResponsesRelay, ARecordIsInsertedWhenTheUpstreamSentNone) {
  std::string stream = kBackendStream;
  const size_t at = stream.find(",\"cutline\":");
  const size_t end = stream.find("},\"text\"", at);
  stream.erase(at, end + 1 - at);
  ResponsesRelay relay(ResponsesRelayOptions{false, "x", "tiny"});
  TokenTiming timing;
  std::string out;
  ASSERT_TRUE(relay.feed(stream, 1000, timing, out).ok());
  relay.write_end(budget_record(), false, out);
  EXPECT_EQ(count_of(out, "\"cutline\":"), 1u) << out;
  EXPECT_EQ(out.rfind("{\"cutline\":{\"v\":1,\"cause\":\"gateway_budget\"", 0), 0u) << out;
}

TEST(ResponsesRelay, TopLevelObjectSkipsNestedAndQuotedKeys) {
  const std::string_view json =
      R"({"a":{"cutline":{"x":1}},"s":"\"cutline\":{}","cutline":{"v":1,"n":{"m":[1]}},"z":2})";
  const auto at = top_level_object(json, "cutline");
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(json.substr(at->first, at->second - at->first), R"({"v":1,"n":{"m":[1]}})");
  EXPECT_FALSE(top_level_object(R"({"cutline":null})", "cutline").has_value());
}

}  // namespace
}  // namespace cutline::gateway
