// UpstreamAttempts: one request's attempts on its upstream's pool (pick, retry elsewhere,
// outcome, the record's attempts and endpoints), and which passthrough failures are safe to retry.
#include "cutline/gateway/upstream_attempts.h"

#include <gtest/gtest.h>

#include "cutline/gateway/upstream_pools.h"
#include "cutline/policy/loader.h"

namespace cutline::gateway {
namespace {

std::shared_ptr<const policy::Policy> load() {
  auto r = policy::load_policy_text(
      "listen:\n  - address: 127.0.0.1:8080\nupstreams:\n"
      "  - name: pool\n    endpoints: [\"http://10.0.0.1:8081/base\", "
      "\"http://10.0.0.2:8081/base\"]\n"
      "    balance: round_robin\n"
      "    outlier: {consecutive_failures: 1, max_ejection_percent: 100}\n"
      "  - name: single\n    url: http://10.0.0.9:9000\n    models: [other]\n"
      "policies:\n  - name: all\n",
      "cutline.yaml");
  EXPECT_TRUE(r.ok()) << r.error_text();
  return r.policy;
}

TEST(UpstreamAttempts, PicksRetriesElsewhereAndRecordsEveryEndpoint) {
  base::ManualClock clock(1000000000);
  auto policy = load();
  UpstreamPools pools(policy, clock);
  const policy::Upstream& up = policy->upstreams[0];
  UpstreamAttempts attempts;
  proto::ClientRequest req;
  std::string base;
  ASSERT_TRUE(attempts.pick(&pools, up, "m", {}, req, base).ok());
  EXPECT_EQ(req.host, "10.0.0.1");
  EXPECT_EQ(base, "/base");
  EXPECT_TRUE(attempts.may_retry());
  EXPECT_EQ(pools.find("pool")->endpoints()[0]->outstanding(), 1);

  ASSERT_TRUE(attempts.retry(&pools, EndpointOutcome::kConnectFailure, req, "/v1/models"));
  EXPECT_EQ(req.host, "10.0.0.2");
  EXPECT_EQ(req.target, "/base/v1/models");
  const auto endpoints = pools.find("pool")->endpoints();
  EXPECT_EQ(endpoints[0]->outstanding(), 0);
  EXPECT_TRUE(endpoints[0]->ejected(clock.now_ns()));
  EXPECT_EQ(endpoints[0]->counters().retries, 1u);
  EXPECT_EQ(endpoints[1]->outstanding(), 1);
  // Nothing left to try: no retry, the request stays where it is.
  EXPECT_FALSE(attempts.retry(&pools, EndpointOutcome::kServerError, req, "/v1/models"));
  EXPECT_EQ(req.host, "10.0.0.2");
  EXPECT_EQ(endpoints[1]->outstanding(), 0);

  proto::StopRecord record;
  attempts.fill_record(record);
  EXPECT_EQ(record.attempts, 2);
  EXPECT_EQ(record.endpoints, (std::vector<std::string>{"10.0.0.1:8081", "10.0.0.2:8081"}));
  // A second upstream's attempts (/v1/models asks each) add to the same record.
  UpstreamAttempts single;
  ASSERT_TRUE(single.pick(&pools, policy->upstreams[1], {}, {}, req, base).ok());
  EXPECT_FALSE(single.may_retry());  // one endpoint: nowhere else to go
  single.report(EndpointOutcome::kSuccess);
  single.fill_record(record);
  EXPECT_EQ(record.attempts, 3);
  EXPECT_EQ(record.endpoints.back(), "10.0.0.9:9000");

  // Both endpoints of the pool are ejected: the next request gets an error at once.
  UpstreamAttempts late;
  const Status none = late.pick(&pools, up, {}, {}, req, base);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind, ErrorKind::kExhausted);
  EXPECT_EQ(late.attempts(), 0u);
}

// A request every endpoint answers 500 (its own content provokes it) counts one failure, on the
// first endpoint that answered so: retrying it must not advance a second endpoint towards
// ejection. A connect failure stays the endpoint's own, retried or not.
TEST(UpstreamAttempts, ARequestCountsOneServerErrorHoweverManyEndpointsAnswerIt) {
  base::ManualClock clock(1000000000);
  auto policy = load();
  const policy::Upstream& up = policy->upstreams[0];
  {
    UpstreamPools pools(policy, clock);
    UpstreamAttempts attempts;
    proto::ClientRequest req;
    std::string base;
    ASSERT_TRUE(attempts.pick(&pools, up, "m", {}, req, base).ok());
    ASSERT_TRUE(attempts.retry(&pools, EndpointOutcome::kServerError, req, "/v1/models"));
    attempts.report(EndpointOutcome::kServerError);  // the other endpoint: 500 too
    const auto endpoints = pools.find("pool")->endpoints();
    EXPECT_TRUE(endpoints[0]->ejected(clock.now_ns()));
    EXPECT_FALSE(endpoints[1]->ejected(clock.now_ns()));  // consecutive_failures: 1, yet not
    EXPECT_EQ(endpoints[1]->counters().errors, 1u);       // counted as an error all the same
    UpstreamAttempts next;
    EXPECT_TRUE(next.pick(&pools, up, "m", {}, req, base).ok());
  }
  {
    UpstreamPools pools(policy, clock);
    UpstreamAttempts attempts;
    proto::ClientRequest req;
    std::string base;
    ASSERT_TRUE(attempts.pick(&pools, up, "m", {}, req, base).ok());
    ASSERT_TRUE(attempts.retry(&pools, EndpointOutcome::kConnectFailure, req, "/v1/models"));
    attempts.report(EndpointOutcome::kServerError);  // the first 5xx of this request
    const auto endpoints = pools.find("pool")->endpoints();
    EXPECT_TRUE(endpoints[0]->ejected(clock.now_ns()));
    EXPECT_TRUE(endpoints[1]->ejected(clock.now_ns()));
  }
}

TEST(UpstreamAttempts, WithoutPoolsTheUrlIsUsedAndNothingRecorded) {
  auto policy = load();
  UpstreamAttempts attempts;
  proto::ClientRequest req;
  req.host = "10.0.0.9";
  std::string base = "/as-written";
  ASSERT_TRUE(attempts.pick(nullptr, policy->upstreams[1], {}, {}, req, base).ok());
  EXPECT_EQ(req.host, "10.0.0.9");
  EXPECT_EQ(base, "/as-written");
  EXPECT_FALSE(attempts.may_retry());
  proto::StopRecord record;
  attempts.fill_record(record);
  EXPECT_FALSE(record.attempts.has_value());
}

TEST(UpstreamAttempts, PassthroughRetriesOnlyWhatIsSafe) {
  using K = proto::ClientErrorKind;
  // Never reached the upstream: any method.
  for (K k : {K::kResolve, K::kConnectRefused, K::kConnectTimeout, K::kConnectFailed}) {
    EXPECT_TRUE(retry_is_safe("POST", k));
    EXPECT_TRUE(retry_is_safe("GET", k));
  }
  // Sent, then reset before the head, or answered 5xx: only methods that change nothing.
  for (std::optional<K> k : {std::optional<K>(K::kClosedBeforeHead), std::optional<K>()}) {
    EXPECT_TRUE(retry_is_safe("GET", k));
    EXPECT_TRUE(retry_is_safe("HEAD", k));
    EXPECT_TRUE(retry_is_safe("OPTIONS", k));
    EXPECT_FALSE(retry_is_safe("POST", k));
    EXPECT_FALSE(retry_is_safe("DELETE", k));
    EXPECT_FALSE(retry_is_safe("PUT", k));
  }
  EXPECT_FALSE(retry_is_safe("GET", K::kClosedMidBody));
}

}  // namespace
}  // namespace cutline::gateway
