// Loading `admin`: loopback unless an address says otherwise, and the optional bearer token
// (stored as a digest, like tenants' keys).
#include <gtest/gtest.h>

#include "cutline/policy/api_key.h"
#include "cutline/policy/loader.h"
#include "policy_test_util.h"

namespace cutline::policy {
namespace {

using testing::load_errors;
using testing::load_ok;

std::string with_admin(const std::string& admin) {
  return "listen:\n  - address: 127.0.0.1:8080\nadmin:\n" + admin +
         "upstreams:\n  - {name: u, url: \"http://127.0.0.1:9000\"}\n"
         "policies:\n  - name: p\n";
}

LoadOptions env() {
  return LoadOptions{[](const std::string& n) -> std::optional<std::string> {
    if (n == "ADMIN_TOKEN") return std::string("tok-123");
    return std::nullopt;
  }};
}

TEST(AdminListener, WithoutAnAddressItBindsLoopback8091) {
  auto p = load_ok(with_admin("  {}\n"));
  ASSERT_TRUE(p && p->admin);
  EXPECT_EQ(p->admin->host, "127.0.0.1");
  EXPECT_EQ(p->admin->port, 8091);
  EXPECT_FALSE(p->admin->token);
}

TEST(AdminListener, APortAloneBindsLoopback) {
  auto p = load_ok(with_admin("  address: \":9191\"\n"));
  ASSERT_TRUE(p && p->admin);
  EXPECT_EQ(p->admin->host, "127.0.0.1");
  EXPECT_EQ(p->admin->port, 9191);
  EXPECT_EQ(p->admin->address, "127.0.0.1:9191");
}

TEST(AdminListener, AnExplicitAddressIsKept) {
  auto p = load_ok(with_admin("  address: 0.0.0.0:8091\n"));
  ASSERT_TRUE(p && p->admin);
  EXPECT_EQ(p->admin->host, "0.0.0.0");
}

TEST(AdminListener, ANetworkAddressWithoutATokenIsWarnedAbout) {
  for (const char* address :
       {"0.0.0.0:8091", "10.1.2.3:8091", "\"[::]:8091\"", "admin.internal:8091"}) {
    LoadResult r =
        load_policy_text(with_admin(std::string("  address: ") + address + "\n"), "c.yaml");
    ASSERT_TRUE(r.ok()) << r.error_text();
    ASSERT_EQ(r.warnings.size(), 1u) << address << ": " << r.warning_text();
    EXPECT_EQ(r.warnings[0].line, 4) << r.warning_text();
    EXPECT_EQ(r.warnings[0].path, "admin.address") << r.warning_text();
    EXPECT_NE(r.warnings[0].message.find("without admin.token"), std::string::npos)
        << r.warning_text();
  }
  // Loopback, or a token: nothing to say.
  for (const std::string& admin :
       {std::string("  {}\n"), std::string("  address: \":9191\"\n"),
        std::string("  address: 127.0.0.2:8091\n"), std::string("  address: \"[::1]:8091\"\n"),
        std::string("  address: localhost:8091\n"),
        std::string("  address: 0.0.0.0:8091\n  token: env:ADMIN_TOKEN\n")}) {
    LoadResult r = load_policy_text(with_admin(admin), "c.yaml", env());
    ASSERT_TRUE(r.ok()) << r.error_text();
    EXPECT_TRUE(r.warnings.empty()) << admin << ": " << r.warning_text();
  }
}

TEST(AdminListener, TokenFromTheEnvironmentIsHashed) {
  auto p = load_ok(with_admin("  address: 127.0.0.1:8091\n  token: env:ADMIN_TOKEN\n"), env());
  ASSERT_TRUE(p && p->admin && p->admin->token);
  EXPECT_EQ(p->admin->token->digest, sha256_digest("tok-123"));
  EXPECT_EQ(p->admin->token->label, "env:ADMIN_TOKEN");
}

TEST(AdminListener, BadTokensAndAddressesAreErrors) {
  EXPECT_NE(load_errors(with_admin("  token: env:MISSING\n"), env()).find("admin.token"),
            std::string::npos);
  EXPECT_NE(load_errors(with_admin("  token: plain-text\n"), env()).find("plain keys"),
            std::string::npos);
  EXPECT_NE(load_errors(with_admin("  address: \":nope\"\n")).find("admin.address"),
            std::string::npos);
  EXPECT_NE(load_errors(with_admin("  adress: 127.0.0.1:1\n")).find("unknown key"),
            std::string::npos);
}

}  // namespace
}  // namespace cutline::policy
