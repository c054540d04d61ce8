// Linked into every test binary: ignore SIGPIPE as cutline-gateway and cutline-backend do, so
// that a peer closing mid-write gives an error value (EPIPE) instead of killing the test process.
#include <csignal>

namespace {
const bool kSigpipeIgnored = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();
}  // namespace
