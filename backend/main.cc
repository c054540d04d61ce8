// cutline-backend: the co-located inference backend (OpenAI API with stop causes and TTFT phases,
// multi-model residency). Options: backend/README.md or --help.
//
// Start-up prints one line to stdout once the port is open (tests and supervisors read it):
//   cutline-backend listening on http://HOST:PORT
// SIGTERM/SIGINT: stop taking requests, let streams finish for --drain-timeout, end the rest with
// a labeled stop, exit 0.

#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "cutline/cli/cli.h"
#include "cutline/server/backend_options.h"
#include "cutline/server/backend_server.h"

int main(int argc, char** argv) {
  using namespace cutline;
  const char* env_cache = std::getenv("CUTLINE_CACHE_DIR");
  const char* home = std::getenv("HOME");
  auto options =
      server::parse_backend_options(argc, argv, env_cache ? env_cache : "", home ? home : "");
  if (!options.ok()) {
    std::fprintf(stderr, "cutline-backend: %s (see cutline-backend --help)\n",
                 options.error().message.c_str());
    return cli::kExitUsage;
  }
  if (options->help) {
    std::fputs(server::backend_usage().c_str(), stdout);
    return cli::kExitOk;
  }
  if (options->version) {
    std::printf("%s\n", cli::version_line("cutline-backend").c_str());
    return cli::kExitOk;
  }

  // Signals are taken by sigwait() on this thread only: block them before any thread starts.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const int64_t drain_timeout_ms = options->drain_timeout_ms;
  const std::string host = options->host;
  auto server = server::BackendServer::create(std::move(options).value());
  if (!server.ok()) {
    std::fprintf(stderr, "cutline-backend: %s\n", server.error().message.c_str());
    return 1;
  }
  if (auto st = (*server)->start(); !st.ok()) {
    std::fprintf(stderr, "cutline-backend: %s\n", st.error().message.c_str());
    return 1;
  }
  std::printf("cutline-backend listening on http://%s:%u\n", host.c_str(),
              static_cast<unsigned>((*server)->port()));
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "cutline-backend: %s: draining (up to %lld ms)\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", static_cast<long long>(drain_timeout_ms));
  (*server)->shutdown(drain_timeout_ms);
  std::fprintf(stderr, "cutline-backend: stopped\n");
  return 0;
}
