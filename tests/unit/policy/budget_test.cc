// reserve_budget(): pools clamp or reject per rule, label the source, and never leak.
#include "cutline/policy/budget.h"

#include <gtest/gtest.h>

#include "policy_test_util.h"

namespace cutline::policy {
namespace {

using testing::load_ok;
using testing::with_policies;

using testing::env;
using testing::kTenants;

Decision decide_for(const Policy& p, std::string_view tenant, std::optional<int64_t> max) {
  RequestFacts f;
  f.tenant = tenant;
  f.model = "m";
  f.route = "/v1/chat/completions";
  f.client_max_tokens = max;
  return decide(p, f, {});
}

class Budget : public ::testing::Test {
 protected:
  base::ManualClock clock_;
  MemoryPoolStore store_{clock_};
};

TEST_F(Budget, RuleWithoutPoolsReservesNothing) {
  auto p = load_ok(with_policies("  - name: p\n    budget: {max_output_tokens: 100}\n"));
  Decision d = decide_for(*p, "", 50);
  PoolGrant g = reserve_budget(d, store_);
  EXPECT_TRUE(g.admitted);
  EXPECT_FALSE(g.tenant.active());
  EXPECT_FALSE(g.global.active());
  EXPECT_EQ(d.max_output_tokens.tokens, 50);
}

TEST_F(Budget, ClampToWhatRemainsInTheTenantPool) {
  auto p = load_ok(with_policies("  - name: p\n"
                                 "    budget:\n"
                                 "      max_output_tokens: 500\n"
                                 "      tenant_tokens_per_minute: 600\n"  // line 13
                                 "      on_pool_exhausted: clamp\n",
                                 kTenants),
                   env());
  Decision d1 = decide_for(*p, "alice", std::nullopt);
  PoolGrant g1 = reserve_budget(d1, store_);
  ASSERT_TRUE(g1.admitted);
  EXPECT_EQ(d1.max_output_tokens.tokens, 500);
  EXPECT_EQ(d1.max_output_tokens.source.kind, SourceKind::kRuleClamp);

  Decision d2 = decide_for(*p, "alice", std::nullopt);
  PoolGrant g2 = reserve_budget(d2, store_);
  ASSERT_TRUE(g2.admitted);
  EXPECT_EQ(d2.max_output_tokens.tokens, 100);
  EXPECT_EQ(d2.max_output_tokens.source.kind, SourceKind::kTenantPool);
  EXPECT_EQ(d2.max_output_tokens.source.path, "policies[0].budget.tenant_tokens_per_minute");
  EXPECT_EQ(d2.max_output_tokens.source.line, 13);
  EXPECT_EQ(g2.tenant.tokens(), 100);

  // Bob's pool is his own.
  Decision d3 = decide_for(*p, "bob", std::nullopt);
  ASSERT_TRUE(reserve_budget(d3, store_).admitted);
  EXPECT_EQ(d3.max_output_tokens.tokens, 500);

  // Alice's pool is empty now: even clamp rejects below min_output_tokens (1).
  Decision d4 = decide_for(*p, "alice", std::nullopt);
  PoolGrant g4 = reserve_budget(d4, store_);
  EXPECT_FALSE(g4.admitted);
  EXPECT_EQ(g4.rejected_by.kind, SourceKind::kTenantPool);
  EXPECT_EQ(g4.retry_after_s, 1);  // 1 token at 10/s
}

TEST_F(Budget, RejectSaysRetryAfterFromTheRefillRate) {
  auto p =
      load_ok(with_policies("  - name: p\n"
                            "    budget: {max_output_tokens: 300, global_tokens_per_minute: "
                            "600}\n"));
  Decision d1 = decide_for(*p, "", std::nullopt);
  PoolGrant g1 = reserve_budget(d1, store_);
  Decision d2 = decide_for(*p, "", 250);
  PoolGrant g2 = reserve_budget(d2, store_);
  ASSERT_TRUE(g1.admitted && g2.admitted);  // 600 - 300 - 250 = 50 left
  Decision d3 = decide_for(*p, "", std::nullopt);
  PoolGrant g3 = reserve_budget(d3, store_);
  EXPECT_FALSE(g3.admitted);
  EXPECT_EQ(g3.rejected_by.kind, SourceKind::kGlobalPool);
  EXPECT_EQ(g3.needed_tokens, 300);
  EXPECT_EQ(g3.available_tokens, 50);
  EXPECT_EQ(g3.retry_after_s, 25);              // 250 missing at 10 tokens/s
  EXPECT_EQ(d3.max_output_tokens.tokens, 300);  // unchanged by a rejection
}

TEST_F(Budget, RefundAtFinishMakesRoomAgain) {
  auto p =
      load_ok(with_policies("  - name: p\n"
                            "    budget: {max_output_tokens: 300, global_tokens_per_minute: "
                            "600}\n"));
  Decision d1 = decide_for(*p, "", std::nullopt);
  PoolGrant g1 = reserve_budget(d1, store_);
  Decision d2 = decide_for(*p, "", std::nullopt);
  PoolGrant g2 = reserve_budget(d2, store_);
  Decision d3 = decide_for(*p, "", std::nullopt);
  EXPECT_FALSE(reserve_budget(d3, store_).admitted);
  g1.settle(20);  // a short answer gives back 280: still not enough for 300
  Decision d4 = decide_for(*p, "", std::nullopt);
  EXPECT_FALSE(reserve_budget(d4, store_).admitted);
  g2.settle(280);  // gives back 20
  Decision d5 = decide_for(*p, "", std::nullopt);
  {
    PoolGrant g5 = reserve_budget(d5, store_);
    EXPECT_TRUE(g5.admitted);
    EXPECT_EQ(store_.available({"global/p", 600}), 0);
  }
  EXPECT_EQ(store_.available({"global/p", 600}), 300);  // g5 dropped unsettled: all back
}

TEST_F(Budget, CancelledRequestsRefundEverything) {
  auto p = load_ok(with_policies("  - name: p\n"
                                 "    budget: {max_output_tokens: 300, tenant_tokens_per_minute: "
                                 "300, global_tokens_per_minute: 600}\n",
                                 kTenants),
                   env());
  PoolSpec tenant{"tenant/p/alice", 300}, global{"global/p", 600};
  {
    Decision d = decide_for(*p, "alice", std::nullopt);
    PoolGrant g = reserve_budget(d, store_);
    ASSERT_TRUE(g.admitted);
    EXPECT_EQ(store_.available(tenant), 0);
    EXPECT_EQ(store_.available(global), 300);
    // The client disconnects in the queue: the grant is dropped unsettled.
  }
  EXPECT_EQ(store_.available(tenant), 300);
  EXPECT_EQ(store_.available(global), 600);
}

TEST_F(Budget, GlobalRejectionGivesTheTenantPoolBackItsShare) {
  auto p = load_ok(with_policies("  - name: p\n"
                                 "    budget: {max_output_tokens: 300, tenant_tokens_per_minute: "
                                 "600, global_tokens_per_minute: 300}\n",
                                 kTenants),
                   env());
  Decision d1 = decide_for(*p, "bob", std::nullopt);
  PoolGrant g1 = reserve_budget(d1, store_);  // drains the global pool
  ASSERT_TRUE(g1.admitted);
  Decision d2 = decide_for(*p, "alice", std::nullopt);
  PoolGrant g2 = reserve_budget(d2, store_);
  EXPECT_FALSE(g2.admitted);
  EXPECT_EQ(g2.rejected_by.kind, SourceKind::kGlobalPool);
  EXPECT_EQ(store_.available({"tenant/p/alice", 600}), 600);
}

TEST_F(Budget, GlobalClampShrinksTheTenantReservation) {
  auto p = load_ok(with_policies("  - name: p\n"
                                 "    budget: {max_output_tokens: 300, tenant_tokens_per_minute: "
                                 "1000, global_tokens_per_minute: 400, on_pool_exhausted: "
                                 "clamp}\n",
                                 kTenants),
                   env());
  Decision d1 = decide_for(*p, "bob", std::nullopt);
  PoolGrant g1 = reserve_budget(d1, store_);
  Decision d2 = decide_for(*p, "alice", std::nullopt);
  PoolGrant g2 = reserve_budget(d2, store_);
  ASSERT_TRUE(g2.admitted);
  EXPECT_EQ(d2.max_output_tokens.tokens, 100);
  EXPECT_EQ(d2.max_output_tokens.source.kind, SourceKind::kGlobalPool);
  EXPECT_EQ(g2.tenant.tokens(), 100);
  EXPECT_EQ(store_.available({"tenant/p/alice", 1000}), 900);
}

TEST_F(Budget, MinOutputTokensRejectsTinyClamps) {
  auto p =
      load_ok(with_policies("  - name: p\n"
                            "    budget: {max_output_tokens: 500, global_tokens_per_minute: "
                            "520, on_pool_exhausted: clamp, min_output_tokens: 64}\n"));
  Decision d1 = decide_for(*p, "", std::nullopt);
  PoolGrant g1 = reserve_budget(d1, store_);  // 20 left
  Decision d2 = decide_for(*p, "", std::nullopt);
  PoolGrant g2 = reserve_budget(d2, store_);
  EXPECT_FALSE(g2.admitted);
  EXPECT_EQ(g2.needed_tokens, 64);
  EXPECT_EQ(g2.retry_after_s, 6);  // 44 missing at 520/60 per second = 5.08 s
}

}  // namespace
}  // namespace cutline::policy

namespace cutline::policy {
namespace {

// n and best_of: every choice may use the whole limit, so the pools reserve for all of them,
// and a clamp to what remains divides it between them.
TEST_F(Budget, EveryChoiceIsReservedAndAClampIsShared) {
  auto p =
      load_ok(with_policies("  - name: p\n"
                            "    budget:\n"
                            "      max_output_tokens: 100\n"
                            "      global_tokens_per_minute: 450\n"
                            "      on_pool_exhausted: clamp\n"));
  RequestFacts f;
  f.model = "m";
  f.route = "/v1/chat/completions";
  f.choices = 4;
  Decision d = decide(*p, f, {});
  EXPECT_EQ(d.choices, 4);
  PoolGrant g = reserve_budget(d, store_);
  ASSERT_TRUE(g.admitted);
  EXPECT_EQ(d.max_output_tokens.tokens, 100);  // 4 x 100 of 450
  Decision d2 = decide(*p, f, {});
  PoolGrant g2 = reserve_budget(d2, store_);
  ASSERT_TRUE(g2.admitted);
  EXPECT_EQ(d2.max_output_tokens.tokens, 12);  // 50 left for 4 choices
  EXPECT_EQ(d2.max_output_tokens.source.kind, SourceKind::kGlobalPool);
}

// max_output_tokens x choices must never wrap: 8 x 2^60 is 2^63 (negative as int64) and
// 8 x 2^61 is 2^64 (zero). Either would leave the pool drained for everyone or admit a request
// with nothing reserved; both are refused and the pool is untouched.
TEST_F(Budget, ChoicesThatWouldOverflowTheReservationAreRefusedNotWrapped) {
  auto p = load_ok(
      with_policies("  - name: p\n"
                    "    budget: {max_output_tokens: 8, global_tokens_per_minute: 1000}\n"));
  const PoolSpec global{"global/p", 1000};
  for (int64_t choices : {int64_t{1} << 60, int64_t{1} << 61, INT64_MAX}) {
    RequestFacts f;
    f.model = "m";
    f.route = "/v1/chat/completions";
    f.choices = choices;
    Decision d = decide(*p, f, {});
    PoolGrant g = reserve_budget(d, store_);
    EXPECT_FALSE(g.admitted) << choices;
    EXPECT_FALSE(g.global.active()) << choices;
    EXPECT_GT(g.needed_tokens, 1000) << choices;
    EXPECT_LE(g.retry_after_s, 120) << choices;
    EXPECT_EQ(store_.available(global), 1000) << choices;
  }
  // Another request still gets its whole reservation.
  Decision d = decide_for(*p, "", std::nullopt);
  PoolGrant g = reserve_budget(d, store_);
  ASSERT_TRUE(g.admitted);
  EXPECT_EQ(g.global.tokens(), 8);
}

// Under clamp, min_output_tokens x choices saturates too: the request is refused, not served a
// wrapped minimum.
TEST_F(Budget, ClampMinimumThatWouldOverflowIsRefused) {
  auto p =
      load_ok(with_policies("  - name: p\n"
                            "    budget:\n"
                            "      max_output_tokens: 8\n"
                            "      global_tokens_per_minute: 1000\n"
                            "      on_pool_exhausted: clamp\n"
                            "      min_output_tokens: 4\n"));
  RequestFacts f;
  f.model = "m";
  f.route = "/v1/chat/completions";
  f.choices = int64_t{1} << 62;
  Decision d = decide(*p, f, {});
  PoolGrant g = reserve_budget(d, store_);
  EXPECT_FALSE(g.admitted);
  EXPECT_EQ(store_.available(PoolSpec{"global/p", 1000}), 1000);
}

TEST(BudgetChoices, ARuleMayCapTheNumberOfChoices) {
  auto p =
      load_ok(with_policies("  - name: p\n    budget: {max_output_tokens: 10, max_choices: 2}\n"));
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->rules[0].budget.max_choices);
  EXPECT_EQ(p->rules[0].budget.max_choices->value, 2);
  EXPECT_EQ(p->rules[0].budget.max_choices->ref.path, "policies[0].budget.max_choices");
}

}  // namespace
}  // namespace cutline::policy
