// explain(): every number printed with the rule and line behind it.
#include "cutline/policy/explain.h"

#include <gtest/gtest.h>

#include "policy_test_util.h"

namespace cutline::policy {
namespace {

TEST(Explain, EveryNumberNamesItsRuleAndLine) {
  auto p = testing::load_ok(testing::with_policies(
      "  - name: chat\n"
      "    budget:\n"
      "      max_output_tokens: 1024\n"
      "      global_tokens_per_minute: 200000\n"
      "      adaptive: [{when: {queue_depth_gt: 8}, max_output_tokens: 256}]\n"
      "    deadline: 60s\n"
      "    ttft_timeout: 10s\n"
      "    admission: {max_concurrent: 8, queue_depth: 64, queue_timeout: 2s}\n"));
  RequestFacts f;
  f.model = "m";
  f.route = "/v1/chat/completions";
  f.client_max_tokens = 2000;
  f.client_deadline_ms = 5000;
  Decision d = decide(*p, f, LiveState{9, 8});
  const std::string text = explain(d);
  for (const char* want :
       {"policy \"chat\"  (policies[0], line 7, first match wins)",
        "live state: queue_depth 9, in_flight 8", "requested max_tokens: 2000",
        "max_output_tokens    256          adaptive     "
        "policies[0].budget.adaptive[0].max_output_tokens (line 11)",
        "global_pool          200000/min   global_pool  "
        "policies[0].budget.global_tokens_per_minute (line 10)",
        "deadline             5s           client       header Cutline-Deadline-Ms",
        "ttft_timeout         10s          rule         policies[0].ttft_timeout (line 13)",
        "idle_timeout         -            no limit set",
        "max_concurrent       8            rule         policies[0].admission.max_concurrent (line "
        "14)",
        "queue_timeout        2s           rule         policies[0].admission.queue_timeout (line "
        "14)",
        "on_cut               label/length rule         policies[0].on_cut (default)"}) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\n" << text;
  }
}

TEST(Explain, NoMatchSaysWhatTheGatewayDoes) {
  auto p = testing::load_ok(
      testing::with_policies("  - name: chat\n    match: {routes: [/v1/chat/completions]}\n"));
  RequestFacts f;
  f.model = "m";
  f.route = "/v1/embeddings";
  EXPECT_NE(explain(decide(*p, f, {})).find("the gateway answers 404 (model_not_found"),
            std::string::npos);
}

TEST(Explain, PoolRejectionShowsRetryAfter) {
  auto p = testing::load_ok(testing::with_policies(
      "  - name: chat\n    budget: {max_output_tokens: 100, global_tokens_per_minute: 100}\n"));
  base::ManualClock clock;
  MemoryPoolStore store(clock);
  RequestFacts f;
  f.model = "m";
  f.route = "/v1/chat/completions";
  Decision d1 = decide(*p, f, {});
  PoolGrant g1 = reserve_budget(d1, store);
  Decision d2 = decide(*p, f, {});
  PoolGrant g2 = reserve_budget(d2, store);
  EXPECT_NE(explain(d1, &g1).find("pools: admitted, global pool reserved 100"), std::string::npos);
  EXPECT_NE(explain(d2, &g2).find("pools: rejected (429 admission_rejected, Retry-After 60): "
                                  "needs 100, 0 available; global_pool  "
                                  "policies[0].budget.global_tokens_per_minute (line 8)"),
            std::string::npos)
      << explain(d2, &g2);
}

TEST(Explain, SummaryListsTheParts) {
  auto p = testing::load_ok(testing::with_policies("  - name: all\n"));
  const std::string s = summarize(*p);
  EXPECT_NE(s.find("listeners (1):\n  127.0.0.1:8080"), std::string::npos) << s;
  EXPECT_NE(s.find("upstreams (1):\n  local  http://127.0.0.1:8081  models *"), std::string::npos)
      << s;
  EXPECT_NE(s.find("tenants (0): none, no authentication"), std::string::npos) << s;
  EXPECT_NE(s.find("rules (1, first match wins):\n  [0] all  (line 7)"), std::string::npos) << s;
}

}  // namespace
}  // namespace cutline::policy
