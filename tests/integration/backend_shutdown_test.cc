// cutline-backend stops promptly on SIGTERM while clients keep talking to it. Regression test
// for a shutdown deadlock: shutdown() held the server's request-count mutex while it waited for
// every event loop (to close the listener); a loop that was at that moment answering
// /v1/cutline/state or /metrics, or ending a stream, waited for the same mutex, and neither
// ever proceeded (the co-located gateway then SIGKILLed the backend after its 10 s grace).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "backend_harness.h"

namespace cutline::test {
namespace {

// Each round: a fresh backend, clients polling the paths that read the request counts (on
// both worker loops), then SIGTERM while they poll. With the deadlock back in place, five runs
// of five hung within three rounds; one round takes well under a second.
TEST(BackendShutdown, SigtermWhileClientsPollTheStateExitsPromptly) {
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    Backend backend;
    ASSERT_TRUE(backend.start({"--model", "tiny=builtin", "--threads", "2"}))
        << backend.stderr_text();
    std::atomic<bool> stop{false};
    std::atomic<int> answered{0};
    std::vector<std::thread> pollers;
    for (int t = 0; t < 4; ++t) {
      pollers.emplace_back([&, t] {
        const std::string path = t % 2 == 0 ? "/v1/cutline/state" : "/metrics";
        while (!stop.load()) {
          auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(backend.port()) + path,
                                     "GET", {}, {}, 2000);
          if (r.ok() && r->status == 200) ++answered;
        }
      });
    }
    ASSERT_TRUE(wait_for([&] { return answered.load() >= 40; }, 20000));
    const auto begin = std::chrono::steady_clock::now();
    const int status = backend.stop(8000);  // SIGTERM; -1 when it had to be killed
    const auto took = std::chrono::steady_clock::now() - begin;
    stop = true;
    for (auto& p : pollers) p.join();
    ASSERT_EQ(status, 0) << "round " << round << ": no exit 8 s after SIGTERM\n"
                         << backend.stderr_text();
    EXPECT_LT(took, std::chrono::seconds(3)) << "round " << round;
  }
}

}  // namespace
}  // namespace cutline::test
