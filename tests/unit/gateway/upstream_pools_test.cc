// UpstreamPools: one pool per upstream of a policy, the live picture (/v1/cutline/upstreams and
// the per-endpoint Prometheus series), and state carried across a reload.
#include "cutline/gateway/upstream_pools.h"

#include <gtest/gtest.h>

#include "cutline/policy/loader.h"

namespace cutline::gateway {
namespace {

std::shared_ptr<const policy::Policy> load(const std::string& extra = "") {
  auto r = policy::load_policy_text(
      "listen:\n  - address: 127.0.0.1:8080\nupstreams:\n"
      "  - name: pool\n    endpoints: [\"http://10.0.0.1:8081\", \"http://10.0.0.2:8081\"]\n"
      "    outlier: {consecutive_failures: 1}\n" +
          extra +
          "  - name: single\n    url: http://10.0.0.9:9000\n    models: [other]\n"
          "policies:\n  - name: all\n",
      "cutline.yaml");
  EXPECT_TRUE(r.ok()) << r.error_text();
  return r.policy;
}

TEST(UpstreamPools, OnePoolPerUpstreamAndTheLivePicture) {
  base::ManualClock clock(1000000000);
  auto policy = load();
  UpstreamPools pools(policy, clock);
  ASSERT_NE(pools.find(policy->upstreams[1]), nullptr);
  EXPECT_EQ(pools.find("single")->endpoints().size(), 1u);
  EndpointPool* pool = pools.find("pool");
  ASSERT_NE(pool, nullptr);
  EndpointLease held = pool->pick({});
  EndpointLease failed = pool->pick({{}, {}, std::vector<uint64_t>{held.endpoint_id()}});
  ASSERT_TRUE(held && failed);
  const std::string failed_label = failed.endpoint().address().label;
  EXPECT_TRUE(failed.report(EndpointOutcome::kConnectFailure));  // ejected after one failure
  failed.endpoint().retried_away();  // the request went on to another endpoint

  const std::string json = pools.render_json();
  EXPECT_NE(json.find(R"("name":"pool","balance":"least_request","load_report":"none")"),
            std::string::npos)
      << json;
  EXPECT_NE(
      json.find(
          R"("address":")" + failed_label +
          R"(","healthy":true,"checked":false,"ejected":true,"ejected_for_ms":30000,"outstanding":0,)"
          R"("requests":1,"errors":1,"ejections":1)"),
      std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("outstanding":1,"requests":1,"errors":0)"), std::string::npos) << json;

  const std::string text = pools.render_prometheus();
  EXPECT_NE(text.find("# TYPE cutline_upstream_endpoint_ejections_total counter\n"),
            std::string::npos);
  EXPECT_NE(text.find("cutline_upstream_panic_total{upstream=\"pool\"} 0\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("cutline_upstream_panic{upstream=\"pool\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(json.find(R"("panic":false,"panic_picks":0)"), std::string::npos) << json;
  EXPECT_NE(text.find("cutline_upstream_endpoint_retries_total{upstream=\"pool\",endpoint=\"" +
                      failed_label + "\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(json.find(R"("affinity_hits":0,"retries":1)"), std::string::npos) << json;
  EXPECT_NE(text.find("cutline_upstream_endpoint_ejected{upstream=\"pool\",endpoint=\"" +
                      failed_label + "\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cutline_upstream_endpoint_outstanding{upstream=\"single\",endpoint=\"10.0."
                      "0.9:9000\"} 0\n"),
            std::string::npos)
      << text;
}

TEST(UpstreamPools, AReloadKeepsTheStateOfEndpointsThatStay) {
  base::ManualClock clock(1000000000);
  auto before = load();
  UpstreamPools old_pools(before, clock);
  EndpointLease l = old_pools.find("pool")->pick({});
  ASSERT_TRUE(l);
  const std::string label = l.endpoint().address().label;
  l.report(EndpointOutcome::kServerError);  // ejected

  auto after = load("    balance: round_robin\n");
  UpstreamPools new_pools(after, clock);
  new_pools.adopt(old_pools);
  for (const auto& e : new_pools.find("pool")->endpoints()) {
    if (e->address().label == label) {
      EXPECT_TRUE(e->ejected(clock.now_ns()));
      EXPECT_EQ(e->counters().errors, 1u);
    }
  }
  for (int i = 0; i < 4; ++i) {  // the ejected endpoint stays out after the reload
    EndpointLease n = new_pools.find("pool")->pick({});
    ASSERT_TRUE(n);
    EXPECT_NE(n.endpoint().address().label, label);
  }
}

}  // namespace
}  // namespace cutline::gateway
