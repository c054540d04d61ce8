#include "cutline/tools/probe/record.h"

#include <gtest/gtest.h>

namespace cutline::tools::probe {
namespace {

RequestRecord ok_record(const std::string& finish, int64_t tokens, int64_t max_tokens) {
  RequestRecord r;
  r.http_status = 200;
  r.finish_reason = finish;
  r.output_tokens = tokens;
  r.max_tokens_requested = max_tokens;
  return r;
}

TEST(ProbeRecord, DerivesCausesAPlainClientCanSee) {
  auto r = ok_record("stop", 5, 10);
  derive_cause(r, true);
  EXPECT_EQ(r.cause, "eos");
  EXPECT_TRUE(r.model_stop);
  EXPECT_FALSE(r.truncated);

  r = ok_record("length", 10, 10);
  derive_cause(r, true);
  EXPECT_EQ(r.cause, "client_max_tokens");

  r = ok_record("length", 4, 10);
  derive_cause(r, true);
  EXPECT_EQ(r.cause, kLengthBelowMax);
  EXPECT_TRUE(r.truncated);

  r = ok_record("", 4, 10);
  derive_cause(r, true);
  EXPECT_EQ(r.cause, kNoFinishReason);
  r = ok_record("", 4, 10);
  derive_cause(r, false);
  EXPECT_EQ(r.cause, "upstream_disconnect");

  r = ok_record("", 0, 10);
  r.http_status = 503;
  derive_cause(r, false);
  EXPECT_EQ(r.cause, "upstream_error");
  r.http_status = 429;
  derive_cause(r, false);
  EXPECT_EQ(r.cause, "admission_rejected");
  r.http_status = 403;  // the endpoint's policy refuses it: not a capacity problem either
  derive_cause(r, false);
  EXPECT_EQ(r.cause, "policy_denied");
  EXPECT_TRUE(r.truncated);
  r.http_status = 400;  // refused as malformed: not a capacity problem
  derive_cause(r, false);
  EXPECT_EQ(r.cause, "invalid_request");

  r = ok_record("tool_calls", 5, 10);
  derive_cause(r, true);
  EXPECT_EQ(r.cause, "eos");
  EXPECT_TRUE(r.model_stop);
  r = ok_record("content_filter", 5, 10);
  derive_cause(r, true);
  EXPECT_EQ(r.cause, "content_filter");
  EXPECT_TRUE(r.truncated);

  r = ok_record("", 3, 10);
  r.client_timeout = true;
  derive_cause(r, false);
  EXPECT_EQ(r.cause, "client_cancel");

  r = ok_record("gateway_deadline", 3, 10);  // a policy with on_cut.finish_reason: cause
  derive_cause(r, true);
  EXPECT_EQ(r.cause, "gateway_deadline");
  EXPECT_EQ(r.cause_source, CauseSource::kDerived);
}

TEST(ProbeRecord, StopRecordWins) {
  proto::StopRecord rec;
  rec.cause = proto::Cause::kGatewayDeadline;
  rec.reporter = "gateway";
  rec.policy = "interactive";
  rec.rule = "policies[0].deadline";
  rec.limit = 300;
  rec.unit = "ms";
  rec.output_tokens = 7;
  rec.count_method = proto::CountMethod::kUsage;
  rec.phases = proto::TtftPhases{1, 2, 3, 4, 5};
  RequestRecord r = ok_record("length", 7, 20);
  apply_stop_record(r, rec);
  EXPECT_EQ(r.cause, "gateway_deadline");
  EXPECT_EQ(r.cause_source, CauseSource::kCutline);
  EXPECT_EQ(r.rule, "policies[0].deadline");
  EXPECT_EQ(r.queue_ms, 1.0);  // from the phases when no queue_ms
  EXPECT_TRUE(r.truncated);
}

TEST(ProbeRecord, ContentHashIsStableAndDistinguishes) {
  EXPECT_EQ(content_hash(""), "cbf29ce484222325");
  EXPECT_EQ(content_hash("abc"), content_hash("abc"));
  EXPECT_NE(content_hash("abc"), content_hash("abd"));
}

}  // namespace
}  // namespace cutline::tools::probe
