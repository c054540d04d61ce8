#include "cutline/policy/api_key.h"

#include <gtest/gtest.h>

#include "cutline/policy/policy.h"
#include "policy_test_util.h"

namespace cutline::policy {
namespace {

TEST(ApiKey, Sha256MatchesTheKnownDigest) {
  // printf %s sk-alice-example | sha256sum
  EXPECT_EQ(digest_hex(sha256_digest("sk-alice-example")),
            "d48fce52832c460238fb82e9f6c57be593ad27ea6ddb5e15d74d1fb4245a76cd");
}

TEST(ApiKey, DigestEqual) {
  KeyDigest a = sha256_digest("x");
  KeyDigest b = a;
  EXPECT_TRUE(digest_equal(a, b));
  b[31] ^= 1;
  EXPECT_FALSE(digest_equal(a, b));
}

TEST(ApiKey, AuthenticateFindsTheOwningTenantOnly) {
  LoadOptions env{[](const std::string& n) -> std::optional<std::string> {
    if (n == "BOB") return "sk-bob";
    return std::nullopt;
  }};
  auto p = testing::load_ok(
      testing::with_policies(
          "  - name: all\n",
          "tenants:\n"
          "  - name: alice\n"
          "    api_keys: "
          "[\"sha256:d48fce52832c460238fb82e9f6c57be593ad27ea6ddb5e15d74d1fb4245a76cd\"]\n"
          "  - name: bob\n"
          "    api_keys: [\"env:BOB\"]\n"),
      env);
  ASSERT_TRUE(p);
  const Tenant* alice = authenticate(*p, "sk-alice-example");
  ASSERT_TRUE(alice);
  EXPECT_EQ(alice->name, "alice");
  const Tenant* bob = authenticate(*p, "sk-bob");
  ASSERT_TRUE(bob);
  EXPECT_EQ(bob->name, "bob");
  EXPECT_EQ(authenticate(*p, "sk-mallory"), nullptr);
  EXPECT_EQ(authenticate(*p, ""), nullptr);
}

}  // namespace
}  // namespace cutline::policy
