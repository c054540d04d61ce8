#pragma once
// Helpers for the policy unit tests: load YAML text, expect success or exact errors.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "cutline/policy/loader.h"

namespace cutline::policy::testing {

// The smallest valid file around a `policies:` section (and optional tenants).
inline std::string with_policies(const std::string& policies, const std::string& tenants = "") {
  return "listen:\n  - address: 127.0.0.1:8080\n"
         "upstreams:\n  - name: local\n    url: http://127.0.0.1:8081\n" +
         tenants + "policies:\n" + policies;
}

// Two tenants for with_policies(): alice (key env:A) and bob (env:B).
inline constexpr const char* kTenants =
    "tenants:\n"
    "  - {name: alice, api_keys: [\"env:A\"]}\n"
    "  - {name: bob, api_keys: [\"env:B\"]}\n";

// Load options under which every env: secret is set (VAR reads as "kVAR").
inline LoadOptions env() {
  return LoadOptions{[](const std::string& n) -> std::optional<std::string> { return "k" + n; }};
}

inline std::shared_ptr<const Policy> load_ok(const std::string& yaml, const LoadOptions& o = {}) {
  LoadResult r = load_policy_text(yaml, "cutline.yaml", o);
  EXPECT_TRUE(r.ok()) << r.error_text();
  return r.policy;
}

inline std::string load_errors(const std::string& yaml, const LoadOptions& o = {}) {
  LoadResult r = load_policy_text(yaml, "cutline.yaml", o);
  EXPECT_FALSE(r.ok());
  return r.error_text();
}

}  // namespace cutline::policy::testing
