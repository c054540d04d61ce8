// `cutline policy diff`: rules paired by name, every change in explain's words with the new
// value's YAML line, and whom the rule applies to.
#include "cutline/policy/diff.h"

#include <gtest/gtest.h>

#include "policy_test_util.h"

namespace cutline::policy {
namespace {

constexpr const char* kTenants =
    "tenants:\n"
    "  - {name: alice, api_keys: "
    "[\"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaa\"]}\n"
    "  - {name: bob, api_keys: "
    "[\"sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
    "bbb\"]}\n";

std::shared_ptr<const Policy> load(const std::string& policies) {
  return testing::load_ok(testing::with_policies(policies, kTenants));
}

TEST(PolicyDiff, EqualPoliciesHaveNoChanges) {
  const std::string p =
      "  - name: chat\n    match: {tenants: [alice]}\n    deadline: 30s\n"
      "  - name: rest\n";
  bool changed = true;
  EXPECT_EQ(diff(*load(p), *load(p), &changed), "no changes\n");
  EXPECT_FALSE(changed);
}

TEST(PolicyDiff, ChangedValuesNameTheRuleItsRequestsAndTheNewLine) {
  auto before = load(
      "  - name: chat\n"
      "    match: {tenants: [alice], routes: [/v1/chat/completions]}\n"
      "    deadline: 30s\n"
      "    on_cut: {mode: observe}\n"
      "  - name: rest\n");
  auto after = load(
      "  - name: chat\n"
      "    match: {tenants: [alice], routes: [/v1/chat/completions]}\n"
      "    budget: {max_output_tokens: 512}\n"
      "    deadline: 20s\n"
      "  - name: rest\n");
  bool changed = false;
  const std::string out = diff(*before, *after, &changed);
  EXPECT_TRUE(changed);
  EXPECT_NE(out.find("policy \"chat\"  (policies[0] (line 10))  tenants alice  models *  routes "
                     "/v1/chat/completions\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("max_output_tokens    unlimited -> 512         "
                     "policies[0].budget.max_output_tokens (line 12)"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find("deadline             30s -> 20s               policies[0].deadline (line 13)"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("on_cut               observe/length -> label/length"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("policy \"rest\""), std::string::npos) << "rest did not change:\n" << out;
  EXPECT_EQ(out.find("idle_timeout"), std::string::npos) << out;
}

TEST(PolicyDiff, AddedRemovedReorderedRulesAndTenants) {
  auto before = load(
      "  - name: chat\n    match: {tenants: [alice]}\n"
      "  - name: batch\n    match: {tenants: [bob]}\n"
      "  - name: old\n    match: {models: [legacy]}\n"
      "  - name: rest\n");
  auto after = testing::load_ok(testing::with_policies(
      "  - name: batch\n    match: {tenants: [bob]}\n    idle_timeout: 5s\n"
      "  - name: chat\n    match: {tenants: [alice], models: [gpt-*]}\n"
      "  - name: rest\n",
      "tenants:\n  - {name: bob, api_keys: [\"sha256:" + std::string(64, 'b') +
          "\"]}\n"
          "  - {name: alice, api_keys: [\"sha256:" +
          std::string(64, 'a') +
          "\"]}\n"
          "  - {name: carol, api_keys: [\"sha256:" +
          std::string(64, 'c') + "\"]}\n"));
  const std::string out = diff(*before, *after);
  EXPECT_NE(out.find("    match                tenants alice  models *  routes *\n"
                     "                      -> tenants alice  models gpt-*  routes *\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("idle_timeout         - -> 5s"), std::string::npos) << out;
  EXPECT_NE(out.find("policy \"old\"  (policies[2] (line 14))  tenants *  models legacy  routes *  "
                     "removed"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("first-match order: chat,batch,rest -> batch,chat,rest"), std::string::npos)
      << out;
  EXPECT_NE(out.find("tenant \"carol\" added\n"), std::string::npos) << out;
}

TEST(PolicyDiff, AnAddedRuleListsItsValues) {
  auto before = load("  - name: rest\n");
  auto after = load(
      "  - name: chat\n    match: {tenants: [alice]}\n    ttft_timeout: 2s\n"
      "  - name: rest\n");
  const std::string out = diff(*before, *after);
  EXPECT_NE(out.find("policy \"chat\"  (policies[0] (line 10))  tenants alice  models *  routes *  "
                     "added\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("ttft_timeout         2s"), std::string::npos) << out;
  EXPECT_EQ(out.find("idle_timeout"), std::string::npos) << "defaults are not listed:\n" << out;
  EXPECT_EQ(out.find("first-match order"), std::string::npos) << "rest keeps its place:\n" << out;
}

}  // namespace
}  // namespace cutline::policy
