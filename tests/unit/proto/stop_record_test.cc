#include "cutline/proto/wire/stop_record.h"

#include <gtest/gtest.h>

namespace cutline::proto {
namespace {

TEST(StopRecord, TaxonomyHasSeventeenCausesWithStableNames) {
  EXPECT_EQ(kCauseCount, 17);
  EXPECT_EQ(kOriginCount, 7);
  for (int i = 0; i < kCauseCount; ++i) {
    Cause c = cause_at(i);
    auto back = parse_cause(to_string(c));
    ASSERT_TRUE(back.has_value()) << to_string(c);
    EXPECT_EQ(*back, c);
  }
  EXPECT_EQ(to_string(Cause::kGatewayIdleTimeout), "gateway_idle_timeout");
  // Appended causes keep the older ones' indices (the engine's counters are indexed by them).
  EXPECT_EQ(static_cast<int>(Cause::kUpstreamDisconnect), 13);
  EXPECT_EQ(to_string(Cause::kContentFilter), "content_filter");
  EXPECT_EQ(to_string(Cause::kInvalidRequest), "invalid_request");
  EXPECT_EQ(static_cast<int>(Cause::kInvalidRequest), 15);
  EXPECT_EQ(static_cast<int>(Cause::kPolicyDenied), 16);
  EXPECT_EQ(to_string(Cause::kPolicyDenied), "policy_denied");
  EXPECT_EQ(to_string(Origin::kPolicy), "policy");
  EXPECT_FALSE(parse_cause("stop").has_value());
}

TEST(StopRecord, OriginAndTruncationFollowDesign) {
  EXPECT_EQ(origin_of(Cause::kEos), Origin::kModel);
  EXPECT_EQ(origin_of(Cause::kClientMaxTokens), Origin::kClient);
  EXPECT_EQ(origin_of(Cause::kGatewayDeadline), Origin::kGateway);
  EXPECT_EQ(origin_of(Cause::kBackendOom), Origin::kBackend);
  EXPECT_EQ(origin_of(Cause::kUpstreamError), Origin::kUpstream);
  EXPECT_EQ(origin_of(Cause::kUpstreamDisconnect), Origin::kTransport);
  EXPECT_FALSE(is_truncated(Cause::kEos));
  EXPECT_FALSE(is_truncated(Cause::kStopSequence));
  EXPECT_TRUE(is_truncated(Cause::kClientMaxTokens));
  EXPECT_FALSE(is_serving_cut(Cause::kClientMaxTokens));
  EXPECT_TRUE(is_serving_cut(Cause::kGatewayBudget));
  EXPECT_EQ(default_finish_reason(Cause::kEos), "stop");
  EXPECT_EQ(default_finish_reason(Cause::kGatewayDeadline), "length");
  // content_filter: the model's (the provider's) stop, truncated but not a serving cut.
  EXPECT_EQ(origin_of(Cause::kContentFilter), Origin::kModel);
  EXPECT_TRUE(is_truncated(Cause::kContentFilter));
  EXPECT_FALSE(is_serving_cut(Cause::kContentFilter));
  EXPECT_EQ(default_finish_reason(Cause::kContentFilter), "content_filter");
  // invalid_request: the client's malformed request, not a capacity problem.
  EXPECT_EQ(origin_of(Cause::kInvalidRequest), Origin::kClient);
  EXPECT_FALSE(is_serving_cut(Cause::kInvalidRequest));
  EXPECT_TRUE(is_serving_cut(Cause::kAdmissionRejected));
}

// policy_denied: the operator's rules refuse the request by design. The client holds no answer
// (truncated), but serving cut nothing: no truncation, no admission problem.
TEST(StopRecord, PolicyDeniedIsARefusalOfThePolicyNotAServingCut) {
  EXPECT_EQ(origin_of(Cause::kPolicyDenied), Origin::kPolicy);
  EXPECT_TRUE(is_truncated(Cause::kPolicyDenied));
  EXPECT_FALSE(is_serving_cut(Cause::kPolicyDenied));
  EXPECT_EQ(default_finish_reason(Cause::kPolicyDenied), "length");

  StopRecord r;
  r.cause = Cause::kPolicyDenied;
  r.reporter = "gateway";
  r.rule = "passthrough";
  r.message = "no policy rule matches GET /v1/files (passthrough: deny)";
  const std::string json = stop_record_json(r);
  EXPECT_NE(json.find(R"("cause":"policy_denied","origin":"policy","truncated":true,)"
                      R"("serving_cut":false)"),
            std::string::npos)
      << json;
  auto back = parse_stop_record(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->cause, Cause::kPolicyDenied);
  EXPECT_EQ(back->origin(), Origin::kPolicy);
  EXPECT_EQ(back->rule, "passthrough");
  EXPECT_EQ(back->message, r.message);

  const std::string header = stop_header_value(r);
  EXPECT_EQ(header.rfind("cause=policy_denied; origin=policy; truncated=true; rule=passthrough", 0),
            0u)
      << header;
  auto from_header = parse_stop_header(header);
  ASSERT_TRUE(from_header.ok());
  EXPECT_EQ(from_header->cause, Cause::kPolicyDenied);

  StopRecord upstream;
  upstream.cause = Cause::kUpstreamError;
  upstream.upstream_cause = Cause::kPolicyDenied;
  auto nested = parse_stop_record(stop_record_json(upstream));
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->upstream_cause, Cause::kPolicyDenied);
}

TEST(StopRecord, JsonRoundTripKeepsEveryField) {
  StopRecord r;
  r.cause = Cause::kGatewayDeadline;
  r.reporter = "gateway";
  r.message = "deadline \"30 s\" exceeded\n";
  r.request_id = "req-1";
  r.policy = "interactive";
  r.rule = "policies[0].deadline";
  r.limit = 30000;
  r.observed = 30004.5;
  r.unit = "ms";
  r.requested_max_tokens = 1024;
  r.effective_max_tokens = 256;
  r.input_tokens = 12;
  r.output_tokens = 77;
  r.count_method = CountMethod::kChunks;
  r.queue_ms = 1.5;
  r.ttft_ms = 20;
  r.itl_mean_ms = 3.25;
  r.itl_max_ms = 9;
  r.duration_ms = 30004.5;
  r.preemptions = 2;
  r.kv_bytes_peak = 1 << 20;
  r.device_free_bytes = 123456789;
  r.phases = TtftPhases{1, 2, 3, 4, 5};
  r.model_state = "cold";
  r.upstream_cause = Cause::kEos;

  std::string json = stop_record_json(r);
  auto back = parse_stop_record(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->cause, r.cause);
  EXPECT_EQ(back->reporter, r.reporter);
  EXPECT_EQ(back->message, r.message);
  EXPECT_EQ(back->request_id, r.request_id);
  EXPECT_EQ(back->policy, r.policy);
  EXPECT_EQ(back->rule, r.rule);
  EXPECT_EQ(back->limit, r.limit);
  EXPECT_EQ(back->observed, r.observed);
  EXPECT_EQ(back->unit, r.unit);
  EXPECT_EQ(back->requested_max_tokens, r.requested_max_tokens);
  EXPECT_EQ(back->effective_max_tokens, r.effective_max_tokens);
  EXPECT_EQ(back->input_tokens, r.input_tokens);
  EXPECT_EQ(back->output_tokens, r.output_tokens);
  EXPECT_EQ(back->count_method, r.count_method);
  EXPECT_EQ(back->queue_ms, r.queue_ms);
  EXPECT_EQ(back->ttft_ms, r.ttft_ms);
  EXPECT_EQ(back->itl_mean_ms, r.itl_mean_ms);
  EXPECT_EQ(back->itl_max_ms, r.itl_max_ms);
  EXPECT_EQ(back->duration_ms, r.duration_ms);
  EXPECT_EQ(back->preemptions, r.preemptions);
  EXPECT_EQ(back->kv_bytes_peak, r.kv_bytes_peak);
  EXPECT_EQ(back->device_free_bytes, r.device_free_bytes);
  EXPECT_EQ(back->phases, r.phases);
  EXPECT_EQ(back->model_state, r.model_state);
  EXPECT_EQ(back->upstream_cause, r.upstream_cause);
}

TEST(StopRecord, JsonCarriesVersionOriginAndTruncated) {
  StopRecord r;
  r.cause = Cause::kBackendPreempted;
  std::string json = stop_record_json(r);
  EXPECT_NE(json.find("\"v\":1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"origin\":\"backend\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"truncated\":true"), std::string::npos) << json;
  // Optional fields that were never set are absent, not zero.
  EXPECT_EQ(json.find("ttft_ms"), std::string::npos) << json;
}

TEST(StopRecord, ParseErrorsNameTheField) {
  auto missing = parse_stop_record(R"({"v":1})");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("\"cause\" is missing"), std::string::npos);

  auto unknown = parse_stop_record(R"({"v":1,"cause":"tired"})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("not a known stop cause"), std::string::npos);

  auto version = parse_stop_record(R"({"v":2,"cause":"eos"})");
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.error().message.find("\"v\" must be 1"), std::string::npos);

  auto wrong_type = parse_stop_record(R"({"v":1,"cause":"eos","ttft_ms":"fast"})");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.error().message.find("ttft_ms"), std::string::npos);

  // An integer field given as a double out of int64's range, or with a fraction, is refused
  // (found by fuzzing: the cast was undefined behaviour).
  auto huge = parse_stop_record(R"({"v":1,"cause":"eos","output_tokens":1e101})");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("output_tokens"), std::string::npos);
  EXPECT_FALSE(parse_stop_record(R"({"v":1,"cause":"eos","preemptions":2.5})").ok());
  auto integral = parse_stop_record(R"({"v":1,"cause":"eos","output_tokens":12.0})");
  ASSERT_TRUE(integral.ok());
  EXPECT_EQ(integral->output_tokens, 12);

  EXPECT_FALSE(parse_stop_record("not json").ok());
  EXPECT_FALSE(parse_stop_record("[1,2]").ok());
}

TEST(StopRecord, UnknownFieldsAreIgnored) {
  auto r = parse_stop_record(R"({"v":1,"cause":"eos","future":{"x":[1,2]},"output_tokens":3})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->output_tokens, 3);
}

TEST(StopRecord, HeaderFormRoundTrip) {
  StopRecord r;
  r.cause = Cause::kGatewayBudget;
  r.policy = "inter;active";
  r.rule = "policies[0].budget.max_output_tokens";
  r.limit = 256;
  r.observed = 256;
  r.unit = "tokens";
  r.output_tokens = 256;
  std::string h = stop_header_value(r);
  EXPECT_EQ(h.find('\n'), std::string::npos);
  EXPECT_NE(h.find("cause=gateway_budget; origin=gateway; truncated=true"), std::string::npos) << h;
  auto back = parse_stop_header(h);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->cause, Cause::kGatewayBudget);
  EXPECT_EQ(back->policy, "inter_active");
  EXPECT_EQ(back->rule, r.rule);
  EXPECT_EQ(back->limit, 256);
  EXPECT_EQ(back->output_tokens, 256);
  EXPECT_FALSE(parse_stop_header("origin=gateway").ok());
}

}  // namespace
}  // namespace cutline::proto

namespace cutline::proto {
namespace {

TEST(StopRecord, UpstreamPoolFieldsRoundTripAndAreAbsentWhenUnknown) {
  StopRecord rec;
  rec.cause = Cause::kUpstreamDisconnect;
  rec.attempts = 2;
  rec.endpoints = {"10.0.0.1:8000", "10.0.0.2:8000"};
  rec.routed_cold = true;
  const std::string json = stop_record_json(rec);
  EXPECT_NE(json.find(R"("attempts":2,"endpoints":["10.0.0.1:8000","10.0.0.2:8000"],)"
                      R"("routed_cold":true)"),
            std::string::npos)
      << json;
  auto back = parse_stop_record(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->attempts, 2);
  EXPECT_EQ(back->endpoints, rec.endpoints);
  EXPECT_EQ(back->routed_cold, true);
  const std::string plain = stop_record_json(StopRecord{});
  EXPECT_EQ(plain.find("attempts"), std::string::npos);
  EXPECT_EQ(plain.find("endpoints"), std::string::npos);
  EXPECT_EQ(plain.find("routed_cold"), std::string::npos);
  EXPECT_FALSE(parse_stop_record(R"({"v":1,"cause":"eos","endpoints":[1]})").ok());
  EXPECT_FALSE(parse_stop_record(R"({"v":1,"cause":"eos","routed_cold":"yes"})").ok());
}

TEST(StopRecord, WouldCutsRoundTripAndAreAbsentWhenNone) {
  StopRecord rec;
  rec.cause = Cause::kEos;
  rec.output_tokens = 40;
  rec.would_cut.push_back(WouldCut{Cause::kGatewayBudget, "policies[0].budget.max_output_tokens", 8,
                                   40, "tokens", 8, 32});
  rec.would_cut.push_back(
      WouldCut{Cause::kGatewayDeadline, "policies[0].deadline", 250, 612.5, "ms", 13, 27});
  const std::string json = stop_record_json(rec);
  EXPECT_NE(json.find(R"("would_cut":[{"cause":"gateway_budget","rule":"policies[0].budget.)"
                      R"(max_output_tokens","limit":8,"observed":40,"unit":"tokens",)"
                      R"("at_token":8,"tokens_after":32},)"),
            std::string::npos)
      << json;
  auto back = parse_stop_record(json);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->would_cut, rec.would_cut);
  EXPECT_EQ(back->cause, Cause::kEos);  // a would-cut does not change why the answer ended
  EXPECT_EQ(stop_record_json(StopRecord{}).find("would_cut"), std::string::npos);
  EXPECT_FALSE(parse_stop_record(R"({"v":1,"cause":"eos","would_cut":{}})").ok());
  EXPECT_FALSE(parse_stop_record(R"({"v":1,"cause":"eos","would_cut":[{"limit":3}]})").ok());
  EXPECT_FALSE(parse_stop_record(R"({"v":1,"cause":"eos","would_cut":[{"cause":"x"}]})").ok());
  EXPECT_FALSE(
      parse_stop_record(R"({"v":1,"cause":"eos","would_cut":[{"cause":"eos","at_token":"1"}]})")
          .ok());
}

}  // namespace
}  // namespace cutline::proto
