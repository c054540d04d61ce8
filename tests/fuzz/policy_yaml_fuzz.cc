// Fuzz target for the policy loader: any bytes must give a Policy or a list of diagnostics,
// never a crash, a hang or an exception. A policy that loads is then exercised through
// decide(), explain() and summarize().
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cutline/policy/decision.h"
#include "cutline/policy/explain.h"
#include "cutline/policy/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cutline::policy;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  LoadOptions options;
  options.env = [](const std::string& name) -> std::optional<std::string> {
    if (name.size() % 2 == 0) return std::nullopt;  // some variables are unset
    return "key-" + name;
  };
  LoadResult r = load_policy_text(text, "fuzz.yaml", options);
  if (!r.ok()) {
    for (const auto& d : r.errors) (void)d.to_string();
    return 0;
  }
  (void)summarize(*r.policy);
  for (const char* model : {"", "gpt-4", "llama-3-8b"}) {
    RequestFacts f;
    f.model = model;
    f.route = "/v1/chat/completions";
    if (!r.policy->tenants.empty()) f.tenant = r.policy->tenants[0].name;
    f.client_max_tokens = 100;
    f.header = [](std::string_view) -> std::optional<std::string_view> { return "batch"; };
    Decision d = decide(*r.policy, f, LiveState{static_cast<int64_t>(size % 64), 1});
    (void)explain(d);
  }
  return 0;
}
