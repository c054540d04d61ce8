// PolicyHolder: reload swaps on success, keeps the old policy on error, and a snapshot taken
// before a reload stays valid.
#include "cutline/policy/policy_holder.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "cutline/policy/decision.h"
#include "policy_test_util.h"
#include "support/unique_temp_path.h"

namespace cutline::policy {
namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

TEST(PolicyHolder, ReloadKeepsTheOldPolicyOnError) {
  const std::string path = test::unique_temp_path("policy_holder_test.yaml");
  write(path, testing::with_policies("  - name: first\n    budget: {max_output_tokens: 100}\n"));
  LoadResult initial = load_policy_file(path);
  ASSERT_TRUE(initial.ok()) << initial.error_text();
  PolicyHolder holder(initial.policy);
  EXPECT_EQ(holder.generation(), 1u);
  auto in_flight = holder.snapshot();  // a stream that started before the reloads

  write(path, testing::with_policies("  - name: second\n    budget: {max_output_tokens: 200}\n"));
  LoadResult ok = holder.reload(path);
  ASSERT_TRUE(ok.ok()) << ok.error_text();
  EXPECT_EQ(holder.generation(), 2u);
  EXPECT_EQ(holder.snapshot()->rules[0].name, "second");

  write(path, testing::with_policies("  - name: third\n    budget: {max_output_tokens: -1}\n"));
  LoadResult bad = holder.reload(path);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.error_text(),
            path +
                ":8:33: policies[0].budget.max_output_tokens: must be a positive integer, "
                "got -1\n");
  EXPECT_EQ(holder.generation(), 2u);
  EXPECT_EQ(holder.snapshot()->rules[0].name, "second");

  std::remove(path.c_str());
  EXPECT_FALSE(holder.reload(path).ok());  // a vanished file is an error too
  EXPECT_EQ(holder.snapshot()->rules[0].name, "second");

  // The old snapshot still decides as it did.
  RequestFacts f;
  f.model = "m";
  f.route = "/v1/chat/completions";
  EXPECT_EQ(decide(*in_flight, f, {}).policy_name, "first");
  EXPECT_EQ(decide(*in_flight, f, {}).max_output_tokens.tokens, 100);
}

}  // namespace
}  // namespace cutline::policy
