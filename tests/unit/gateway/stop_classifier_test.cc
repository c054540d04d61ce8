#include "cutline/gateway/stop_classifier.h"

#include <gtest/gtest.h>

namespace cutline::gateway {
namespace {

using proto::Cause;

UpstreamEnd finished(std::string_view reason) {
  UpstreamEnd e;
  e.kind = UpstreamEndKind::kFinished;
  e.finish_reason = reason;
  return e;
}

TEST(StopClassifier, ModelStopsAreEosOrStopSequence) {
  EXPECT_EQ(classify_upstream_stop(finished("stop"), {}), Cause::kEos);
  auto e = finished("stop");
  e.stop_reason_present = true;
  EXPECT_EQ(classify_upstream_stop(e, {}), Cause::kStopSequence);
  EXPECT_EQ(classify_upstream_stop(finished("tool_calls"), {}), Cause::kEos);
}

TEST(StopClassifier, LengthAtTheClientsOwnLimitIsClientMaxTokens) {
  TokenLimits l{.requested_max_tokens = 10, .effective_max_tokens = 10, .output_tokens = 10};
  EXPECT_EQ(classify_upstream_stop(finished("length"), l), Cause::kClientMaxTokens);
}

TEST(StopClassifier, LengthBelowTheClientsLimitAfterAClampIsGatewayBudget) {
  TokenLimits l{.requested_max_tokens = 100, .effective_max_tokens = 8, .output_tokens = 8};
  EXPECT_EQ(classify_upstream_stop(finished("length"), l), Cause::kGatewayBudget);
  // A clamp where the client gave no limit at all is the gateway's budget too.
  TokenLimits none{.effective_max_tokens = 8, .output_tokens = 8};
  EXPECT_EQ(classify_upstream_stop(finished("length"), none), Cause::kGatewayBudget);
}

TEST(StopClassifier, LengthShortOfEveryLimitIsContextLength) {
  TokenLimits l{.requested_max_tokens = 100, .effective_max_tokens = 100, .output_tokens = 3};
  EXPECT_EQ(classify_upstream_stop(finished("length"), l), Cause::kContextLength);
  EXPECT_EQ(classify_upstream_stop(finished("length"), {}), Cause::kContextLength);
}

TEST(StopClassifier, InexactCountsTrustTheLimitThatWasSent) {
  TokenLimits l{.requested_max_tokens = 100,
                .effective_max_tokens = 8,
                .output_tokens = 3,
                .exact_count = false};
  EXPECT_EQ(classify_upstream_stop(finished("length"), l), Cause::kGatewayBudget);
}

TEST(StopClassifier, ErrorsAndDisconnectsAreNeverCleanEnds) {
  UpstreamEnd e;
  e.kind = UpstreamEndKind::kErrorStatus;
  EXPECT_EQ(classify_upstream_stop(e, {}), Cause::kUpstreamError);
  e.kind = UpstreamEndKind::kErrorEvent;
  EXPECT_EQ(classify_upstream_stop(e, {}), Cause::kUpstreamError);
  e.kind = UpstreamEndKind::kDisconnect;
  EXPECT_EQ(classify_upstream_stop(e, {}), Cause::kUpstreamDisconnect);
  e.kind = UpstreamEndKind::kNoFinish;  // [DONE] without any finish_reason
  EXPECT_EQ(classify_upstream_stop(e, {}), Cause::kUpstreamDisconnect);
  EXPECT_EQ(classify_upstream_stop(finished("abort"), {}), Cause::kUpstreamError);
}

TEST(StopClassifier, ToolCallsAreModelStopsAndContentFilterIsItsOwnCause) {
  EXPECT_EQ(classify_upstream_stop(finished("tool_calls"), {}), Cause::kEos);
  EXPECT_EQ(classify_upstream_stop(finished("function_call"), {}), Cause::kEos);
  EXPECT_EQ(classify_upstream_stop(finished("content_filter"), {}), Cause::kContentFilter);
  EXPECT_EQ(proto::origin_of(Cause::kContentFilter), proto::Origin::kModel);
}

TEST(StopClassifier, BackendCauseWinsExceptForAClampedMaxTokens) {
  auto e = finished("length");
  e.backend_cause = Cause::kBackendPreempted;
  EXPECT_EQ(classify_upstream_stop(e, {}), Cause::kBackendPreempted);
  e.backend_cause = Cause::kBackendOom;
  EXPECT_EQ(classify_upstream_stop(e, {}), Cause::kBackendOom);
  e.backend_cause = Cause::kClientMaxTokens;
  TokenLimits l{.requested_max_tokens = 100, .effective_max_tokens = 8, .output_tokens = 8};
  EXPECT_EQ(classify_upstream_stop(e, l), Cause::kGatewayBudget);
}

}  // namespace
}  // namespace cutline::gateway
