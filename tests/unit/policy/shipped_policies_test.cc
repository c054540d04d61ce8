// Every policy Cutline ships (the quick start, the packaged /etc/cutline/cutline.yaml, the
// examples) loads and serves every route the gateway runs: none has the loader's warning
// about a core route no rule matches (a client of the Responses API or of embeddings would
// be refused). The Kubernetes ConfigMap is checked by tests/unit/deploy.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "cutline/policy/loader.h"

namespace cutline::policy {
namespace {

class ShippedPolicy : public ::testing::TestWithParam<const char*> {};

TEST_P(ShippedPolicy, LoadsAndEveryCoreRouteHasARule) {
  const std::string file = std::string(CUTLINE_SOURCE_DIR) + "/" + GetParam();
  LoadOptions options;
  options.env = [](const std::string&) -> std::optional<std::string> { return "secret"; };
  LoadResult r = load_policy_file(file, options);
  ASSERT_TRUE(r.ok()) << r.error_text();
  for (const Diagnostic& w : r.warnings) {
    EXPECT_EQ(w.message.find("no rule matches route"), std::string::npos) << r.warning_text();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Deploy, ShippedPolicy,
    ::testing::Values("deploy/local/cutline.yaml", "deploy/local/fake.yaml",
                      "deploy/systemd/cutline.yaml", "deploy/examples/first-policy.yaml",
                      "deploy/policies/cutline.yaml", "deploy/policies/batch_interactive.yaml",
                      "deploy/policies/colocated.yaml", "deploy/policies/passthrough.yaml",
                      "deploy/container/cutline.yaml"));

}  // namespace
}  // namespace cutline::policy
