#include "cutline/gateway/metrics.h"

#include <gtest/gtest.h>

#include "cutline/gateway/access_log.h"

namespace cutline::gateway {
namespace {

TEST(GatewayMetrics, UnknownModelsAndTenantsAreBounded) {
  GatewayMetrics m({.models = {"llama"}, .tenants = {"alice"}, .policies = {"interactive"}});
  EXPECT_EQ(m.model_label("llama"), "llama");
  EXPECT_EQ(m.model_label("fake-tokens=5"), "other");
  EXPECT_EQ(m.tenant_label(""), "anonymous");
  EXPECT_EQ(m.tenant_label("mallory"), "other");
  EXPECT_EQ(m.policy_label(""), "none");
}

TEST(GatewayMetrics, StopsAndTruncationsAreCountedByCause) {
  GatewayMetrics m({.models = {"llama"}, .tenants = {}, .policies = {"p"}});
  proto::StopRecord s;
  s.cause = proto::Cause::kGatewayDeadline;
  s.ttft_ms = 12;
  s.duration_ms = 100;
  s.output_tokens = 7;
  ItlBuckets itl;
  itl.add(0.004);
  itl.add(0.2);
  m.record({.route = "/v1/chat/completions",
            .model = "unknown-model",
            .tenant = "",
            .policy = "p",
            .code = 200,
            .stop = &s,
            .itl = &itl,
            .clamp_rule = "policies[0].budget"});
  s.cause = proto::Cause::kEos;
  m.record({.route = "/v1/chat/completions", .model = "llama", .policy = "p", .stop = &s});
  const std::string text = m.serialize();
  EXPECT_NE(text.find("cutline_stops_total{cause=\"gateway_deadline\",model=\"other\","
                      "origin=\"gateway\",policy=\"p\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cutline_truncations_total{cause=\"gateway_deadline\""), std::string::npos);
  EXPECT_EQ(text.find("cutline_truncations_total{cause=\"eos\""), std::string::npos);
  EXPECT_NE(text.find("cutline_inter_token_seconds_count{model=\"other\",policy=\"p\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cutline_budget_clamped_total{rule=\"policies[0].budget\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("code=\"200\""), std::string::npos);
}

// Chargeback: input and output tokens add up per tenant and model; a request whose upstream
// reported no usage adds no input tokens (the gateway has no tokenizer to count them with).
TEST(GatewayMetrics, TokensAddUpPerTenantAndModel) {
  GatewayMetrics m({.models = {"llama"}, .tenants = {"alice"}, .policies = {"p"}});
  proto::StopRecord s;
  s.cause = proto::Cause::kEos;
  s.input_tokens = 11;
  s.output_tokens = 7;
  m.record({.route = "/v1/chat/completions", .model = "llama", .tenant = "alice", .stop = &s});
  s.input_tokens.reset();
  s.output_tokens = 5;
  s.count_method = proto::CountMethod::kChunks;
  m.record({.route = "/v1/chat/completions", .model = "llama", .tenant = "alice", .stop = &s});
  m.record({.route = "/v1/chat/completions", .model = "llama", .tenant = "bob", .stop = &s});
  const std::string text = m.serialize();
  EXPECT_NE(text.find("cutline_tokens_total{model=\"llama\",tenant=\"alice\",type=\"input\"} 11\n"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("cutline_tokens_total{model=\"llama\",tenant=\"alice\",type=\"output\"} 12\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("cutline_tokens_total{model=\"llama\",tenant=\"other\",type=\"output\"} 5\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cutline_build_info{commit=\""), std::string::npos) << text;
}

TEST(GatewayMetrics, ActiveStreamsAndReloadsAreExported) {
  GatewayMetrics m;
  m.stream_opened();
  m.stream_opened();
  m.stream_closed();
  m.policy_reload(false);
  const std::string text = m.serialize();
  EXPECT_NE(text.find("cutline_active_streams 1"), std::string::npos) << text;
  EXPECT_NE(text.find("cutline_policy_reload_total{result=\"error\"} 1"), std::string::npos);
}

TEST(AccessLog, LineCarriesTheStopRecordFlatAndNested) {
  proto::StopRecord s;
  s.cause = proto::Cause::kGatewayBudget;
  s.requested_max_tokens = 100;
  s.effective_max_tokens = 8;
  s.output_tokens = 8;
  s.rule = "policies[0].budget.max_output_tokens";
  AccessLogEntry e{.request_id = "r1",
                   .method = "POST",
                   .path = "/v1/chat/completions",
                   .tenant = "alice",
                   .model = "m",
                   .status = 200,
                   .bytes_in = 10,
                   .bytes_out = 20,
                   .stop = &s};
  const std::string line = access_log_line(e);
  EXPECT_NE(line.find("\"cause\":\"gateway_budget\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"truncated\":true"), std::string::npos);
  EXPECT_NE(line.find("\"requested_max_tokens\":100"), std::string::npos);
  EXPECT_NE(line.find("\"effective_max_tokens\":8"), std::string::npos);
  EXPECT_NE(line.find("\"cutline\":{"), std::string::npos);
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace cutline::gateway
