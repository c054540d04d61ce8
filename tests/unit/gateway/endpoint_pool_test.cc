// EndpointPool: how an endpoint is picked (least_request, round_robin, load_aware, residency,
// prefix affinity), outlier ejection with back-off, health, retries that skip tried endpoints,
// and DNS updates that keep an endpoint's state. A ManualClock drives every time decision; no
// sockets.
#include "cutline/gateway/endpoint_pool.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cutline/policy/loader.h"

namespace cutline::gateway {
namespace {

std::shared_ptr<const policy::Policy> load(const std::string& upstream_keys, int endpoints = 3) {
  std::string list;
  for (int i = 0; i < endpoints; ++i) {
    list += std::string(i ? ", " : "") + "\"http://10.0.0." + std::to_string(i + 1) + ":8081\"";
  }
  const std::string yaml =
      "listen:\n  - address: 127.0.0.1:8080\nupstreams:\n  - name: pool\n"
      "    endpoints: [" +
      list + "]\n" + upstream_keys + "policies:\n  - name: all\n";
  auto r = policy::load_policy_text(yaml, "cutline.yaml");
  EXPECT_TRUE(r.ok()) << r.error_text();
  return r.policy;
}

LoadSnapshot report(int64_t at_ns, int64_t waiting, int64_t running,
                    std::vector<std::string> models = {}) {
  LoadSnapshot s;
  s.at_ns = at_ns;
  s.waiting = waiting;
  s.running = running;
  s.reports_models = true;
  s.resident_models = std::move(models);
  return s;
}

class PoolTest : public ::testing::Test {
 protected:
  void make(const std::string& keys, int endpoints = 3) {
    policy_ = load(keys, endpoints);
    ASSERT_TRUE(policy_);
    pool_ = EndpointPool::create(policy_->upstreams[0], clock_, /*seed=*/7);
  }
  PoolEndpoint& ep(size_t i) { return *pool_->endpoints()[i]; }
  std::string pick_label(PickRequest r = {}) {
    EndpointLease l = pool_->pick(r);
    EXPECT_TRUE(l) << l.error();
    return l ? l.endpoint().address().label : "";
  }

  base::ManualClock clock_{1000000000};
  std::shared_ptr<const policy::Policy> policy_;
  std::shared_ptr<EndpointPool> pool_;
};

TEST_F(PoolTest, LeastRequestSpreadsByOutstandingRequests) {
  make("");
  std::vector<EndpointLease> held;
  for (int i = 0; i < 30; ++i) held.push_back(pool_->pick({}));
  // Power of two choices keeps the outstanding counts within one or two of each other.
  int64_t lo = 100, hi = 0;
  for (size_t i = 0; i < 3; ++i) {
    lo = std::min(lo, ep(i).outstanding());
    hi = std::max(hi, ep(i).outstanding());
  }
  EXPECT_LE(hi - lo, 2) << lo << ".." << hi;
  held.clear();  // unreported leases end as cancelled: nothing outstanding, no errors
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ep(i).outstanding(), 0);
    EXPECT_EQ(ep(i).counters().errors, 0u);
  }
  EXPECT_EQ(ep(0).counters().requests + ep(1).counters().requests + ep(2).counters().requests, 30u);
}

TEST_F(PoolTest, LeastRequestAvoidsABusyEndpoint) {
  make("");
  std::vector<EndpointLease> busy;
  // Pin 20 requests on endpoint 0 by excluding the others.
  const uint64_t others[] = {ep(1).id(), ep(2).id()};
  for (int i = 0; i < 20; ++i) busy.push_back(pool_->pick({{}, {}, others}));
  EXPECT_EQ(ep(0).outstanding(), 20);
  std::map<std::string, int> got;
  for (int i = 0; i < 50; ++i) got[pick_label()]++;  // each lease ends at once
  EXPECT_EQ(got.count("10.0.0.1:8081"), 0u);         // 0 always loses a comparison with an idle one
}

TEST_F(PoolTest, RoundRobinCyclesThroughTheEndpoints) {
  make("    balance: round_robin\n");
  std::vector<std::string> seq;
  for (int i = 0; i < 6; ++i) seq.push_back(pick_label());
  EXPECT_EQ(seq[0], seq[3]);
  EXPECT_EQ(seq[1], seq[4]);
  EXPECT_NE(seq[0], seq[1]);
  EXPECT_NE(seq[1], seq[2]);
  EXPECT_NE(seq[0], seq[2]);
}

TEST_F(PoolTest, LoadAwarePicksTheLeastLoadedReportAndAgesOutStaleOnes) {
  make("    balance: load_aware\n    load_report: {from: vllm, interval: 1s, stale_after: 3s}\n");
  const int64_t now = clock_.now_ns();
  ep(0).set_load(report(now, 8, 4));
  ep(1).set_load(report(now, 0, 1));
  ep(2).set_load(report(now, 3, 4));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(pick_label(), "10.0.0.2:8081");
  // Endpoint 1's report goes stale while the others are refreshed: it counts as unknown (0
  // reported load) only until a fresh report says otherwise.
  clock_.advance_ms(3500);
  ep(0).set_load(report(clock_.now_ns(), 0, 0));
  ep(2).set_load(report(clock_.now_ns(), 9, 9));
  ep(1).set_load(report(now, 0, 1));  // stale
  std::map<std::string, int> got;
  for (int i = 0; i < 10; ++i) got[pick_label()]++;
  EXPECT_EQ(got.count("10.0.0.3:8081"), 0u);
}

TEST_F(PoolTest, ResidencyPrefersWarmEndpointsAndMarksColdPicks) {
  make("    load_report: cutline\n");
  const int64_t now = clock_.now_ns();
  ep(0).set_load(report(now, 0, 0, {"tiny-a"}));
  ep(1).set_load(report(now, 0, 0, {"tiny-b"}));
  ep(2).set_load(report(now, 0, 0, {"tiny-a"}));
  for (int i = 0; i < 10; ++i) {
    EndpointLease l = pool_->pick({"tiny-b", {}, {}});
    ASSERT_TRUE(l);
    EXPECT_EQ(l.endpoint().address().label, "10.0.0.2:8081");
    EXPECT_FALSE(l.routed_cold());
  }
  EndpointLease cold = pool_->pick({"tiny-c", {}, {}});
  ASSERT_TRUE(cold);
  EXPECT_TRUE(cold.routed_cold());
  EXPECT_EQ(cold.endpoint().counters().picked_cold, 1u);
  // Without fresh reports nothing is known: no preference and nothing labelled cold.
  clock_.advance_ms(10000);
  EndpointLease unknown = pool_->pick({"tiny-c", {}, {}});
  EXPECT_FALSE(unknown.routed_cold());
}

TEST_F(PoolTest, SharedPrefixesLandOnOneEndpointWithinTheLoadBound) {
  make("    prefix_affinity: {bytes: 32, max_load_factor: 1.25}\n", 4);
  const std::string system = "You are a helpful assistant. Answer briefly and cite sources. ";
  std::map<std::string, int> got;
  for (int i = 0; i < 8; ++i) {
    EndpointLease l = pool_->pick({{}, system + "question " + std::to_string(i), {}});
    ASSERT_TRUE(l);
    got[l.endpoint().address().label]++;
    EXPECT_TRUE(l.affinity_hit());
  }
  EXPECT_EQ(got.size(), 1u);  // leases end at once: the home endpoint is never overloaded
  // Held requests push the home endpoint over 1.25 x average: the next one spills over.
  std::vector<EndpointLease> held;
  for (int i = 0; i < 6; ++i) held.push_back(pool_->pick({{}, system, {}}));
  std::map<std::string, int> spread;
  for (auto& l : held) spread[l.endpoint().address().label]++;
  EXPECT_GT(spread.size(), 1u);
  int hits = 0;
  for (auto& l : held) hits += l.affinity_hit();
  EXPECT_GE(hits, 2);
  EXPECT_LT(hits, 6);
  // Different prefixes spread over the ring.
  std::map<std::string, int> keys;
  for (int i = 0; i < 64; ++i) keys[pick_label({{}, "prompt " + std::to_string(i * 7919), {}})]++;
  EXPECT_EQ(keys.size(), 4u);
}

TEST_F(PoolTest, ConsecutiveFailuresEjectWithADoublingBackOff) {
  make("    outlier: {consecutive_failures: 3, base_ejection: 10s, max_ejection: 25s}\n", 2);
  const uint64_t bad = ep(0).id();
  const uint64_t good[] = {ep(1).id()};
  auto fail_once = [&] {
    EndpointLease l = pool_->pick({{}, {}, good});
    EXPECT_TRUE(l && l.endpoint_id() == bad);
    return l && l.report(EndpointOutcome::kConnectFailure);
  };
  fail_once();
  fail_once();
  EXPECT_FALSE(ep(0).ejected(clock_.now_ns()));
  {  // a success in between resets the run of failures
    EndpointLease l = pool_->pick({{}, {}, good});
    l.report(EndpointOutcome::kSuccess);
  }
  fail_once();
  fail_once();
  EndpointLease l = pool_->pick({{}, {}, good});
  EXPECT_TRUE(l.report(EndpointOutcome::kServerError));  // the third: ejected
  EXPECT_TRUE(ep(0).ejected(clock_.now_ns()));
  EXPECT_EQ(ep(0).counters().ejections, 1u);
  EXPECT_EQ(ep(0).counters().errors, 5u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pick_label(), "10.0.0.2:8081");
  // Only endpoint 0 may be used but it is ejected: a clear error, not a hang.
  EndpointLease none = pool_->pick({{}, {}, good});
  EXPECT_FALSE(none);
  EXPECT_NE(none.error().find("upstream pool: no endpoint available (2 endpoints: 1 ejected, 0 "
                              "failing health checks, 1 already tried)"),
            std::string::npos)
      << none.error();
  clock_.advance_ms(10001);  // back after base_ejection
  fail_once();
  fail_once();
  fail_once();
  EXPECT_EQ(ep(0).ejected_until_ns(), clock_.now_ns() + 20000 * 1000000LL);  // doubled
  clock_.advance_ms(20001);
  fail_once();
  fail_once();
  fail_once();
  EXPECT_EQ(ep(0).ejected_until_ns(), clock_.now_ns() + 25000 * 1000000LL);  // capped
}

// Failures can be provoked by clients (a request the upstream answers 500): outlier detection
// may eject at most max_ejection_percent of the pool, rounded down — by default half, so that of
// two endpoints one stays in service whatever comes back.
TEST_F(PoolTest, EjectionStopsAtMaxEjectionPercentOfThePool) {
  make("    outlier: {consecutive_failures: 1, base_ejection: 10s}\n", 2);
  auto fail_on = [&](size_t i) {
    std::vector<uint64_t> others;
    for (size_t k = 0; k < pool_->size(); ++k) {
      if (k != i) others.push_back(ep(k).id());
    }
    EndpointLease l = pool_->pick({{}, {}, others});
    EXPECT_TRUE(l && l.endpoint_id() == ep(i).id());
    return l && l.report(EndpointOutcome::kServerError);
  };
  EXPECT_TRUE(fail_on(0));
  EXPECT_FALSE(fail_on(1));  // the last endpoint in service stays
  EXPECT_FALSE(fail_on(1));
  EXPECT_FALSE(ep(1).ejected(clock_.now_ns()));
  EXPECT_EQ(ep(1).counters().errors, 2u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(pick_label(), "10.0.0.2:8081");
  // Endpoint 0 is back: endpoint 1, still failing, may now take its turn.
  clock_.advance_ms(10001);
  EXPECT_TRUE(fail_on(1));
  EXPECT_FALSE(fail_on(0));

  // Four endpoints at 50: two at most. A pool of one is never ejected below 100.
  make("    outlier: {consecutive_failures: 1}\n", 4);
  EXPECT_TRUE(fail_on(0));
  EXPECT_TRUE(fail_on(1));
  EXPECT_FALSE(fail_on(2));
  EXPECT_FALSE(fail_on(3));
  make("    outlier: {consecutive_failures: 1}\n", 1);
  EXPECT_FALSE(fail_on(0));
  EXPECT_TRUE(pool_->pick({}));

  // 100 lets the whole pool go (each endpoint's failures are its own).
  make("    outlier: {consecutive_failures: 1, max_ejection_percent: 100}\n", 2);
  EXPECT_TRUE(fail_on(0));
  EXPECT_TRUE(fail_on(1));
  EXPECT_FALSE(pool_->pick({}));
}

// A 5xx a request already got elsewhere (upstream_attempts.h) is an error in the endpoint's
// counters but not a step towards its ejection.
TEST_F(PoolTest, ARepeatedServerErrorIsCountedButDoesNotEject) {
  make("    outlier: {consecutive_failures: 1, max_ejection_percent: 100}\n", 1);
  for (int i = 0; i < 3; ++i) {
    EndpointLease l = pool_->pick({});
    EXPECT_FALSE(l.report(EndpointOutcome::kServerErrorAgain));
  }
  EXPECT_FALSE(ep(0).ejected(clock_.now_ns()));
  EXPECT_EQ(ep(0).counters().errors, 3u);
}

TEST_F(PoolTest, CancelledAttemptsSayNothingAboutTheEndpoint) {
  make("    outlier: {consecutive_failures: 1}\n", 1);
  for (int i = 0; i < 5; ++i) {
    EndpointLease l = pool_->pick({});
    l.report(EndpointOutcome::kCancelled);
  }
  EXPECT_FALSE(ep(0).ejected(clock_.now_ns()));
  EXPECT_EQ(ep(0).counters().errors, 0u);
}

TEST_F(PoolTest, UnhealthyEndpointsAreSkippedUntilTheyPassAgain) {
  make("    health: {panic_threshold: 0}\n", 2);
  ep(0).set_healthy(false);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(pick_label(), "10.0.0.2:8081");
  ep(1).set_healthy(false);
  EndpointLease none = pool_->pick({});
  EXPECT_FALSE(none);
  EXPECT_NE(none.error().find("2 failing health checks"), std::string::npos) << none.error();
  EXPECT_EQ(pool_->no_endpoint_total(), 1u);
  ep(0).set_healthy(true);
  EXPECT_EQ(pick_label(), "10.0.0.1:8081");
}

TEST(PanicThreshold, FewerThanThePercentHealthy) {
  // Envoy's arithmetic: panic when healthy / total < threshold.
  EXPECT_FALSE(below_panic_threshold(2, 4, 50));  // exactly half: not below
  EXPECT_TRUE(below_panic_threshold(1, 4, 50));
  EXPECT_TRUE(below_panic_threshold(1, 3, 50));
  EXPECT_FALSE(below_panic_threshold(2, 3, 50));
  EXPECT_TRUE(below_panic_threshold(0, 1, 50));
  EXPECT_FALSE(below_panic_threshold(1, 1, 100));
  EXPECT_TRUE(below_panic_threshold(2, 3, 100));
  EXPECT_FALSE(below_panic_threshold(0, 3, 0));   // 0: never
  EXPECT_FALSE(below_panic_threshold(0, 0, 50));  // an empty pool has nothing to spread over
  EXPECT_TRUE(below_panic_threshold(33, 100, 34));
  EXPECT_FALSE(below_panic_threshold(34, 100, 34));
}

TEST_F(PoolTest, EndpointsAreRoutableBeforeTheirFirstCheck) {
  make("", 3);
  EXPECT_FALSE(pool_->health_settled());
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(ep(i).checked());
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(pick_label().empty());
  EXPECT_EQ(pool_->no_endpoint_total(), 0u);
  // One endpoint passed: settled (readiness need not wait for the rest).
  ep(1).set_healthy(true);
  EXPECT_TRUE(pool_->health_settled());
}

TEST_F(PoolTest, AFirstRoundWithNoHealthyEndpointSettlesToo) {
  make("", 2);
  ep(0).set_healthy(false);
  EXPECT_FALSE(pool_->health_settled());
  ep(1).set_healthy(false);
  EXPECT_TRUE(pool_->health_settled());
}

TEST_F(PoolTest, TooFewHealthyEndpointsRouteAcrossAllOfThem) {
  make("    balance: round_robin\n", 3);
  // One of three unhealthy: 67 % healthy, no panic; it is skipped.
  ep(0).set_healthy(false);
  EXPECT_FALSE(pool_->in_panic());
  for (int i = 0; i < 6; ++i) EXPECT_NE(pick_label(), "10.0.0.1:8081");
  EXPECT_EQ(pool_->panic_total(), 0u);
  // Two of three: 33 % < 50 %: every endpoint gets requests, health ignored.
  ep(1).set_healthy(false);
  EXPECT_TRUE(pool_->in_panic());
  std::map<std::string, int> seen;
  for (int i = 0; i < 6; ++i) ++seen[pick_label()];
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(pool_->panic_total(), 6u);
  EXPECT_EQ(pool_->no_endpoint_total(), 0u);
  // Every endpoint failing checks (a wrong health path): still served.
  ep(2).set_healthy(false);
  EXPECT_TRUE(pool_->pick({}));
  // A check passes again: out of panic.
  ep(0).set_healthy(true);
  ep(1).set_healthy(true);
  EXPECT_FALSE(pool_->in_panic());
  for (int i = 0; i < 6; ++i) EXPECT_NE(pick_label(), "10.0.0.3:8081");
  EXPECT_EQ(pool_->panic_total(), 7u);
}

TEST_F(PoolTest, PanicKeepsEjectedEndpointsOut) {
  make("    balance: round_robin\n    outlier: {consecutive_failures: 1}\n", 4);
  // Two of four ejected (the max_ejection_percent cap), one of the others unhealthy: 1 of 4
  // available, panic; the unhealthy one is picked again, the ejected ones are not.
  for (int i = 0; i < 2; ++i) {
    EndpointLease l = pool_->pick({});
    ASSERT_TRUE(l);
    l.report(EndpointOutcome::kConnectFailure);
  }
  std::vector<std::string> ejected;
  for (const auto& e : pool_->endpoints()) {
    if (e->ejected(clock_.now_ns())) ejected.push_back(e->address().label);
  }
  ASSERT_EQ(ejected.size(), 2u);
  for (const auto& e : pool_->endpoints()) {
    if (!e->ejected(clock_.now_ns())) {
      e->set_healthy(false);
      break;
    }
  }
  EXPECT_TRUE(pool_->in_panic());
  std::map<std::string, int> seen;
  for (int i = 0; i < 8; ++i) ++seen[pick_label()];
  EXPECT_EQ(seen.size(), 2u);
  for (const auto& label : ejected) EXPECT_EQ(seen.count(label), 0u) << label;
  // With panic_threshold: 0 the unhealthy one stays out.
  make("    balance: round_robin\n    health: {panic_threshold: 0}\n", 2);
  ep(0).set_healthy(false);
  EXPECT_FALSE(pool_->in_panic());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(pick_label(), "10.0.0.2:8081");
}

TEST_F(PoolTest, ARetrySkipsTheEndpointsAlreadyTried) {
  make("", 3);
  std::vector<uint64_t> tried;
  for (int i = 0; i < 3; ++i) {
    EndpointLease l = pool_->pick({{}, {}, tried});
    ASSERT_TRUE(l);
    for (uint64_t t : tried) EXPECT_NE(l.endpoint_id(), t);
    tried.push_back(l.endpoint_id());
    l.report(EndpointOutcome::kConnectFailure);
  }
  EXPECT_FALSE(pool_->pick({{}, {}, tried}));
}

TEST_F(PoolTest, ANewAddressSetKeepsTheStateOfAddressesThatStay) {
  make("", 2);
  auto kept = pool_->endpoints()[1];
  EndpointLease held = pool_->pick({{}, {}, std::vector<uint64_t>{ep(0).id()}});
  ASSERT_EQ(held.endpoint_id(), kept->id());
  pool_->set_addresses(
      {{"10.0.0.2", 8081, "", "10.0.0.2:8081"}, {"10.0.0.7", 8081, "", "10.0.0.7:8081"}});
  auto now = pool_->endpoints();
  ASSERT_EQ(now.size(), 2u);
  EXPECT_EQ(now[0].get(), kept.get());  // same object: outstanding and counters carry over
  EXPECT_EQ(now[0]->outstanding(), 1);
  EXPECT_EQ(now[1]->address().host, "10.0.0.7");
  pool_->set_addresses({});
  EndpointLease none = pool_->pick({});
  EXPECT_FALSE(none);
  held.report(EndpointOutcome::kSuccess);  // a lease outlives the set it came from
  EXPECT_EQ(kept->outstanding(), 0);
}

TEST(PrefixKey, BytesOrWordsOfThePrompt) {
  EXPECT_EQ(affinity_prefix("hello world, again", policy::AffinityUnit::kBytes, 5), "hello");
  EXPECT_EQ(affinity_prefix("hi", policy::AffinityUnit::kBytes, 5), "hi");
  EXPECT_EQ(affinity_prefix("hello world, again", policy::AffinityUnit::kTokens, 3),
            "hello world,");
  EXPECT_EQ(affinity_hash("abc"), affinity_hash(std::string("abc")));
  EXPECT_NE(affinity_hash("abc"), affinity_hash("abd"));
}

}  // namespace
}  // namespace cutline::gateway
