// The loader's warnings (policy/src/rule_warnings.h): routes no canonical request path can
// match, tenant globs no tenant can carry, rules earlier rules shadow. The file still loads.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cutline/policy/loader.h"
#include "policy_test_util.h"

namespace cutline::policy {
namespace {

using testing::with_policies;

using testing::env;
using testing::kTenants;

// Loads `yaml` (which must be valid) and returns its warnings, one per line.
std::string warnings_of(const std::string& yaml) {
  LoadResult r = load_policy_text(yaml, "cutline.yaml", env());
  EXPECT_TRUE(r.ok()) << r.error_text();
  EXPECT_TRUE(r.errors.empty());
  return r.warning_text();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    out.push_back(text.substr(pos, end - pos));
    pos = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

TEST(RuleWarnings, RoutesNoCanonicalRequestPathCanMatch) {
  const std::string out =
      warnings_of(with_policies("  - name: spelled\n"
                                "    match:\n"
                                "      routes:\n"
                                "        - /v1/chat/completions/\n"     // line 10
                                "        - /v1//embeddings\n"           // 11
                                "        - /v1/./completions\n"         // 12
                                "        - /v1/%63ompletions\n"         // 13
                                "        - /v1/files/a%3ab\n"           // 14
                                "        - \"/v1/chat completions\"\n"  // 15
                                "        - /v1/chat/completions?stream=true\n"
                                "        - /v1/models/*/../x\n"
                                "        - /v1/files/%2F\n"
                                "        - \"/v1/caf\xC3\xA9\"\n"
                                "  - name: rest\n"));
  const std::vector<std::string> w = lines_of(out);
  ASSERT_EQ(w.size(), 10u) << out;
  EXPECT_EQ(w[0],
            "cutline.yaml:10:11: warning: policies[0].match.routes[0]: no request path can match "
            "\"/v1/chat/completions/\": it ends with '/', which the gateway removes before "
            "matching (only \"/\" keeps it): write \"/v1/chat/completions\"");
  EXPECT_NE(w[1].find("routes[1]: no request path can match \"/v1//embeddings\": it contains "
                      "\"//\""),
            std::string::npos)
      << w[1];
  EXPECT_NE(w[2].find("routes[2]: no request path can match \"/v1/./completions\": it contains "
                      "a \".\" or \"..\" segment"),
            std::string::npos)
      << w[2];
  EXPECT_NE(w[3].find("it contains %63, which the gateway decodes to \"c\""), std::string::npos)
      << w[3];
  EXPECT_NE(w[4].find("it contains %3a, which the gateway upper-cases before matching: write %3A"),
            std::string::npos)
      << w[4];
  EXPECT_NE(w[5].find("cutline.yaml:15:11: warning: policies[0].match.routes[5]: no request path "
                      "can match \"/v1/chat completions\": it contains whitespace"),
            std::string::npos)
      << w[5];
  EXPECT_NE(w[6].find("looks like a path with a query string, but routes match the path alone"),
            std::string::npos)
      << w[6];
  EXPECT_NE(w[7].find("routes[7]: no request path can match \"/v1/models/*/../x\": it contains a "
                      "\".\" or \"..\" segment"),
            std::string::npos)
      << w[7];
  EXPECT_NE(w[8].find("an encoded '/', '\\' or NUL"), std::string::npos) << w[8];
  EXPECT_NE(w[9].find("a byte over 0x7e"), std::string::npos) << w[9];
}

TEST(RuleWarnings, RoutesAPathCanMatchAreQuiet) {
  EXPECT_EQ(
      warnings_of(with_policies("  - name: fine\n"
                                "    match:\n"
                                "      routes: [\"/\", \"/v1/*\", \"*/\", \"/v1/files/a%3Ab\",\n"
                                "               \"/v1/models\", \"/v1/%*\", \"/v1/chat?\",\n"
                                "               \"/metrics\", \"*chat*\"]\n"
                                "  - name: rest\n")),
      "");
}

TEST(RuleWarnings, TenantGlobsNoTenantCarries) {
  EXPECT_EQ(warnings_of(with_policies("  - name: team\n"
                                      "    match: {tenants: [alice, \"team-*\"]}\n"
                                      "  - name: rest\n",
                                      kTenants)),
            "cutline.yaml:11:30: warning: policies[0].match.tenants[1]: \"team-*\" matches no "
            "configured tenant, so it never matches (a request without a configured tenant's key "
            "gets 401 first)\n");
  // Without tenants every request carries tenant "": "*" matches it, "a*" cannot.
  EXPECT_EQ(warnings_of(with_policies("  - name: a\n"
                                      "    match: {tenants: [\"a*\"]}\n"
                                      "  - name: all\n"
                                      "    match: {tenants: [\"*\"], models: [x]}\n"
                                      "  - name: rest\n")),
            "cutline.yaml:8:23: warning: policies[0].match.tenants[0]: no tenants are configured "
            "(requests carry no tenant), so \"a*\" never matches\n");
}

TEST(RuleWarnings, ARuleShadowedByABroaderGlobWarns) {
  // The loader's "unreachable" error compares a glob with plain names only: a glob within a
  // glob is this warning, and the file still loads.
  EXPECT_EQ(warnings_of(with_policies("  - name: gpt\n"
                                      "    match: {models: [\"gpt-*\"], routes: [\"/v1/*\"]}\n"
                                      "  - name: gpt4\n"
                                      "    match:\n"
                                      "      models: [\"gpt-4*\", \"gpt-?o\"]\n"
                                      "      routes: [\"/v1/chat/*\", /v1/completions]\n"
                                      "  - name: rest\n")),
            "cutline.yaml:9:5: warning: policies[1]: never matches (the first matching rule "
            "wins): policies[0] (\"gpt\", line 7) comes first and matches every request this "
            "rule would match\n");
}

TEST(RuleWarnings, RulesThatTogetherCoverEveryTenantShadowALaterOne) {
  EXPECT_EQ(
      warnings_of(with_policies("  - name: for-alice\n"
                                "    match: {tenants: [alice], models: [\"*\"]}\n"
                                "  - name: for-bob\n"
                                "    match: {tenants: [bob], headers: {X-Class: \"*\"}}\n"
                                "  - name: bob\n"
                                "    match: {tenants: [bob], models: [\"gpt-*\"]}\n"
                                "  - name: everyone-batch\n"
                                "    match: {tenants: [alice, bob], headers: {X-Class: batch}}\n",
                                kTenants)),
      "cutline.yaml:16:5: warning: policies[3]: never matches (the first matching rule wins): "
      "policies[0] (\"for-alice\", line 10) and policies[1] (\"for-bob\", line 12) come first "
      "and, between them, match every request this rule would match\n");
}

TEST(RuleWarnings, OverlappingRulesThatDoNotCoverAreQuiet) {
  // Each later rule shares requests with an earlier one, but each also matches some request
  // no earlier rule does.
  EXPECT_EQ(warnings_of(with_policies(
                "  - name: gpt4-chat\n"
                "    match: {models: [\"gpt-4*\"], routes: [\"/v1/chat/*\"]}\n"
                "  - name: gpt-any-route\n"  // gpt-3 on chat is its own
                "    match: {models: [\"gpt-*\"]}\n"
                "  - name: alice-gpt\n"  // alice on other models
                "    match: {tenants: [alice], models: [\"*\"], routes: [\"/v1/*\"]}\n"
                "  - name: batch\n"  // bob's batch requests
                "    match: {tenants: [alice, bob], headers: {X-Class: batch}}\n"
                "  - name: bob-embeddings\n"  // bob's, with no header
                "    match: {models: [\"gpt-\", \"o?\"], routes: [\"/v1/embeddings\"]}\n"
                "  - name: any-tenant\n"  // bob without the header
                "    match: {tenants: [\"*\"]}\n",
                kTenants)),
            "");
}

TEST(RuleWarnings, CoreRoutesNoRuleMatches) {
  // Only chat and completions: clients of the Responses API and of embeddings are refused.
  EXPECT_EQ(warnings_of(with_policies(
                "  - name: chat\n"  // line 7
                "    match: {routes: [\"/v1/chat/completions\", \"/v1/completions\"]}\n")),
            "cutline.yaml:7:3: warning: policies: no rule matches routes \"/v1/responses\" and "
            "\"/v1/embeddings\": every request on them is refused (name it in a rule's "
            "match.routes, or leave match.routes out to match every route)\n");
  // One route left out, and a rule whose routes are all covered by globs.
  EXPECT_EQ(warnings_of(with_policies("  - name: v1\n"
                                      "    match: {routes: [\"/v1/*completions\"]}\n"
                                      "  - name: embed\n"
                                      "    match: {routes: [\"/v1/embeddings\"]}\n")),
            "cutline.yaml:7:3: warning: policies: no rule matches route \"/v1/responses\": every "
            "request on it is refused (name it in a rule's match.routes, or leave match.routes "
            "out to match every route)\n");
  // Every core route named, or a rule with no routes: no warning.
  EXPECT_EQ(warnings_of(with_policies(
                "  - name: all\n"
                "    match: {routes: [/v1/chat/completions, /v1/completions, /v1/responses, "
                "/v1/embeddings]}\n")),
            "");
  EXPECT_EQ(warnings_of(with_policies("  - name: chat\n"
                                      "    match: {routes: [\"/v1/chat/completions\"]}\n"
                                      "  - name: rest\n")),
            "");
}

TEST(RuleWarnings, NoWarningsWhenTheFileHasErrors) {
  LoadResult r = load_policy_text(with_policies("  - name: a\n"
                                                "    match: {routes: [\"/v1/x/\"]}\n"
                                                "    deadline: 60\n"),
                                  "cutline.yaml");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.errors.size(), 1u) << r.error_text();
  EXPECT_TRUE(r.warnings.empty()) << r.warning_text();
}

}  // namespace
}  // namespace cutline::policy
