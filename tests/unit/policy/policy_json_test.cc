#include "cutline/policy/policy_json.h"

#include <gtest/gtest.h>

#include <simdjson.h>

#include "policy_test_util.h"

namespace cutline::policy {
namespace {

TEST(PolicyJson, PolicyIsValidJsonWithoutDigests) {
  auto p = testing::load_ok(testing::with_policies(
      "  - name: chat\n    budget: {max_output_tokens: 100}\n    deadline: 2s\n",
      "tenants:\n  - {name: alice, api_keys: [\"sha256:" + std::string(64, 'a') + "\"]}\n"));
  std::string out;
  base::JsonWriter w(out);
  write_policy_json(w, *p);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(out).get(doc), simdjson::SUCCESS) << out;
  EXPECT_EQ(std::string_view(doc["policies"].at(0)["name"]), "chat");
  EXPECT_EQ(int64_t(doc["policies"].at(0)["deadline_ms"]), 2000);
  EXPECT_EQ(std::string_view(doc["tenants"].at(0)["api_keys"].at(0)), "sha256:aaaaaaaa...");
  EXPECT_EQ(out.find(std::string(64, 'a')), std::string::npos);
}

TEST(PolicyJson, DecisionCarriesSources) {
  auto p = testing::load_ok(
      testing::with_policies("  - name: chat\n    budget: {max_output_tokens: 100}\n"));
  RequestFacts f;
  f.model = "m";
  f.route = "/v1/chat/completions";
  f.client_max_tokens = 500;
  std::string out;
  base::JsonWriter w(out);
  write_decision_json(w, decide(*p, f, {}));
  EXPECT_NE(out.find("\"max_output_tokens\":{\"value\":100,\"source\":{\"kind\":\"rule_clamp\","
                     "\"path\":\"policies[0].budget.max_output_tokens\",\"line\":8}}"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"deadline_ms\":{\"value\":null,\"source\":{\"kind\":\"none\"}}"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace cutline::policy

namespace cutline::policy {
namespace {

// Upstream credentials appear by where they come from, never by value.
TEST(PolicyJson, UpstreamCredentialsShowOnlyTheirSource) {
  LoadOptions o{[](const std::string&) -> std::optional<std::string> { return "sk-secret"; }};
  auto p = testing::load_ok(
      "listen:\n  - address: 127.0.0.1:8080\n"
      "upstreams:\n  - name: a\n    url: http://127.0.0.1:1\n    api_key: env:KEY\n"
      "    headers: {X-Org: env:ORG}\n"
      "policies:\n  - name: all\n",
      o);
  ASSERT_TRUE(p);
  std::string out;
  base::JsonWriter w(out);
  write_policy_json(w, *p);
  EXPECT_EQ(out.find("sk-secret"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("api_key":"env:KEY","headers":{"X-Org":"env:ORG"})"), std::string::npos)
      << out;
  EXPECT_NE(out.find(R"("passthrough":"deny")"), std::string::npos) << out;
}

}  // namespace
}  // namespace cutline::policy
