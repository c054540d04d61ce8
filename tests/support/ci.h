#pragma once
// Tests that need a tool from outside the build (node and the openai npm client, redis-server,
// chromium) skip where it is missing, except in CI (CI=true), where a missing tool is a failure:
// deploy/setup.sh installs every one of them there.

#include <cstdlib>
#include <string_view>

namespace cutline::test {

inline bool running_in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string_view(ci) == "true";
}

}  // namespace cutline::test
