// decide(): first match wins, and every number carries the source that set it.
#include "cutline/policy/decision.h"

#include <gtest/gtest.h>

#include <map>

#include "policy_test_util.h"

namespace cutline::policy {
namespace {

using testing::load_ok;
using testing::with_policies;

using testing::env;
using testing::kTenants;

RequestFacts facts(std::string_view tenant, std::string_view model,
                   std::string_view route = "/v1/chat/completions") {
  RequestFacts f;
  f.tenant = tenant;
  f.model = model;
  f.route = route;
  return f;
}

TEST(Decide, FirstMatchingRuleWinsInFileOrder) {
  auto p =
      load_ok(with_policies("  - name: bob-gpt\n"
                            "    match: {tenants: [bob], models: [\"gpt-*\"]}\n"
                            "  - name: batch\n"
                            "    match: {tenants: [alice], headers: {x-cutline-class: batch}}\n"
                            "  - name: completions\n"
                            "    match: {routes: [/v1/completions]}\n"
                            "  - name: rest\n",
                            kTenants),
              env());
  ASSERT_TRUE(p);
  EXPECT_EQ(decide(*p, facts("bob", "gpt-4"), {}).policy_name, "bob-gpt");
  EXPECT_EQ(decide(*p, facts("alice", "gpt-4"), {}).policy_name, "rest");
  EXPECT_EQ(decide(*p, facts("alice", "gpt-4", "/v1/completions"), {}).policy_name, "completions");
  // bob's gpt request also carries the batch header, but bob-gpt comes first.
  RequestFacts f = facts("bob", "gpt-4");
  f.header = [](std::string_view name) -> std::optional<std::string_view> {
    if (name == "x-cutline-class") return "batch";
    return std::nullopt;
  };
  Decision d = decide(*p, f, {});
  EXPECT_EQ(d.policy_name, "bob-gpt");
  EXPECT_EQ(d.rule_index, 0u);
  f.tenant = "alice";
  d = decide(*p, f, {});
  EXPECT_EQ(d.policy_name, "batch");
  EXPECT_EQ(d.rule_index, 1u);
  EXPECT_EQ(match_rule(*p, f), std::optional<size_t>(1));
}

TEST(Decide, NoMatchIsAnExplicitRefusal) {
  auto p = load_ok(with_policies("  - name: chat\n    match: {routes: [/v1/chat/completions]}\n"));
  ASSERT_TRUE(p);
  Decision d = decide(*p, facts("", "m", "/v1/embeddings"), {});
  EXPECT_FALSE(d.matched);
  EXPECT_EQ(d.rule, nullptr);
  EXPECT_EQ(d.no_match_message,
            "no policy matches this request (tenant \"\", model \"m\", route \"/v1/embeddings\")");
}

const char* kBudget =
    "  - name: p\n"
    "    budget:\n"
    "      max_output_tokens: 1024\n"  // line 9
    "      adaptive:\n"
    "        - when: {queue_depth_gt: 8}\n"
    "          max_output_tokens: 256\n"  // line 12
    "        - when: {queue_depth_gt: 32}\n"
    "          max_output_tokens: 64\n";  // line 14

TEST(Decide, ClientValueBelowTheClampIsTheClients) {
  auto p = load_ok(with_policies(kBudget));
  RequestFacts f = facts("", "m");
  f.client_max_tokens = 100;
  Decision d = decide(*p, f, {});
  EXPECT_EQ(d.max_output_tokens.tokens, 100);
  EXPECT_EQ(d.max_output_tokens.source.kind, SourceKind::kClient);
  EXPECT_EQ(d.max_output_tokens.source.path, "request.max_tokens");
  EXPECT_EQ(d.requested_max_tokens, 100);
}

TEST(Decide, RuleClampBelowTheClientValue) {
  auto p = load_ok(with_policies(kBudget));
  RequestFacts f = facts("", "m");
  f.client_max_tokens = 4096;
  Decision d = decide(*p, f, {});
  EXPECT_EQ(d.max_output_tokens.tokens, 1024);
  EXPECT_EQ(d.max_output_tokens.source.kind, SourceKind::kRuleClamp);
  EXPECT_EQ(d.max_output_tokens.source.path, "policies[0].budget.max_output_tokens");
  EXPECT_EQ(d.max_output_tokens.source.line, 9);
  // No client value at all: the clamp still applies.
  d = decide(*p, facts("", "m"), {});
  EXPECT_EQ(d.max_output_tokens.tokens, 1024);
  EXPECT_EQ(d.requested_max_tokens, std::nullopt);
}

TEST(Decide, TieWithTheClientStaysTheClients) {
  auto p = load_ok(with_policies(kBudget));
  RequestFacts f = facts("", "m");
  f.client_max_tokens = 1024;
  EXPECT_EQ(decide(*p, f, {}).max_output_tokens.source.kind, SourceKind::kClient);
}

TEST(Decide, AdaptiveStepsApplyStrictlyAboveTheirDepthAndTheTightestWins) {
  auto p = load_ok(with_policies(kBudget));
  RequestFacts f = facts("", "m");
  f.client_max_tokens = 2000;
  Decision d = decide(*p, f, LiveState{8, 8});
  EXPECT_EQ(d.max_output_tokens.tokens, 1024);  // 8 is not > 8
  d = decide(*p, f, LiveState{9, 8});
  EXPECT_EQ(d.max_output_tokens.tokens, 256);
  EXPECT_EQ(d.max_output_tokens.source.kind, SourceKind::kAdaptive);
  EXPECT_EQ(d.max_output_tokens.source.path, "policies[0].budget.adaptive[0].max_output_tokens");
  EXPECT_EQ(d.max_output_tokens.source.line, 12);
  d = decide(*p, f, LiveState{33, 8});
  EXPECT_EQ(d.max_output_tokens.tokens, 64);
  EXPECT_EQ(d.max_output_tokens.source.path, "policies[0].budget.adaptive[1].max_output_tokens");
  EXPECT_EQ(d.live.queue_depth, 33);
  // A client asking for less than the adaptive step keeps its own value.
  f.client_max_tokens = 50;
  EXPECT_EQ(decide(*p, f, LiveState{33, 8}).max_output_tokens.source.kind, SourceKind::kClient);
}

TEST(Decide, NoLimitAnywhereIsNone) {
  auto p = load_ok(with_policies("  - name: open\n"));
  Decision d = decide(*p, facts("", "m"), {});
  EXPECT_TRUE(d.matched);
  EXPECT_EQ(d.max_output_tokens.tokens, std::nullopt);
  EXPECT_EQ(d.max_output_tokens.source.kind, SourceKind::kNone);
  EXPECT_FALSE(d.deadline.ms);
  EXPECT_EQ(d.deadline.source.kind, SourceKind::kNone);
  EXPECT_FALSE(d.admission.max_concurrent);
  EXPECT_FALSE(d.tenant_pool);
}

TEST(Decide, PoolsAreNamedPerRuleAndTenant) {
  auto p = load_ok(with_policies("  - name: p\n"
                                 "    budget: {max_output_tokens: 100, tenant_tokens_per_minute: "
                                 "1000, global_tokens_per_minute: 5000}\n",
                                 kTenants),
                   env());
  Decision d = decide(*p, facts("alice", "m"), {});
  ASSERT_TRUE(d.tenant_pool);
  EXPECT_EQ(d.tenant_pool->key, "tenant/p/alice");
  EXPECT_EQ(d.tenant_pool->tokens_per_minute, 1000);
  EXPECT_EQ(d.tenant_pool->source.kind, SourceKind::kTenantPool);
  EXPECT_EQ(d.tenant_pool->source.path, "policies[0].budget.tenant_tokens_per_minute");
  ASSERT_TRUE(d.global_pool);
  EXPECT_EQ(d.global_pool->key, "global/p");
  EXPECT_EQ(decide(*p, facts("bob", "m"), {}).tenant_pool->key, "tenant/p/bob");
}

TEST(Decide, ClientDeadlineHeaderOnlyTightens) {
  auto p = load_ok(with_policies("  - name: p\n    deadline: 60s\n    idle_timeout: 5s\n"));
  RequestFacts f = facts("", "m");
  f.client_deadline_ms = 5000;
  Decision d = decide(*p, f, {});
  EXPECT_EQ(d.deadline.ms, 5000);
  EXPECT_EQ(d.deadline.source.kind, SourceKind::kClientHeader);
  EXPECT_EQ(d.deadline.source.path, "header Cutline-Deadline-Ms");
  f.client_deadline_ms = 120000;  // looser: ignored
  d = decide(*p, f, {});
  EXPECT_EQ(d.deadline.ms, 60000);
  EXPECT_EQ(d.deadline.source.kind, SourceKind::kRule);
  EXPECT_EQ(d.deadline.source.path, "policies[0].deadline");
  EXPECT_EQ(d.deadline.source.line, 8);
  EXPECT_EQ(d.idle_timeout.ms, 5000);
  EXPECT_EQ(d.ttft_timeout.ms, std::nullopt);
  // Without a rule deadline the client's header sets one.
  auto open = load_ok(with_policies("  - name: open\n"));
  f.client_deadline_ms = 120000;
  EXPECT_EQ(decide(*open, f, {}).deadline.ms, 120000);
}

TEST(Decide, AdmissionAndCutPresentationCarryTheirSources) {
  auto p = load_ok(with_policies(
      "  - name: p\n"
      "    admission: {max_concurrent: 8, queue_depth: 64, queue_timeout: 2s, priority: batch}\n"
      "    on_cut: {mode: error, finish_reason: cause}\n"
      "    upstream: local\n"));
  Decision d = decide(*p, facts("", "m"), {});
  EXPECT_EQ(d.admission.group, "p");
  EXPECT_EQ(d.admission.priority, Priority::kBatch);
  EXPECT_EQ(d.admission.max_concurrent, 8);
  EXPECT_EQ(d.admission.max_concurrent_source.path, "policies[0].admission.max_concurrent");
  EXPECT_EQ(d.admission.max_concurrent_source.line, 8);
  EXPECT_EQ(d.admission.queue_depth, 64);
  EXPECT_EQ(d.admission.queue_timeout_ms, 2000);
  EXPECT_EQ(d.on_cut.mode, CutMode::kError);
  EXPECT_EQ(d.on_cut.finish_reason, FinishReasonStyle::kCause);
  EXPECT_EQ(d.on_cut.source.path, "policies[0].on_cut");
  EXPECT_EQ(d.upstream, "local");
}

}  // namespace
}  // namespace cutline::policy
