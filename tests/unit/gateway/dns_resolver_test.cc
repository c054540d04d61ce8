// DnsResolver's lifetime on a loop while other threads open and close descriptors, as the
// gateway's main thread does when it reads the policy file during a reload: a resolver made and
// destroyed over and over answers every time and leaves no descriptor behind. Under
// ThreadSanitizer this also catches a nameserver socket closed while its event is still on the
// loop: the descriptor number is then free for another thread before the event is removed.
#include "cutline/gateway/dns_resolver.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "cutline/proto/net/event_loop.h"

namespace cutline::gateway {
namespace {

int open_descriptors() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

TEST(GatewayDnsResolver, ResolversMadeAndDestroyedBesideAnotherThreadsFilesLeaveNothingBehind) {
  proto::EventLoop loop;
  std::thread runner([&] { loop.run(); });
  // Opens and closes files as fast as it can, so that it takes any descriptor number the loop
  // thread frees.
  std::atomic<bool> stop{false};
  std::thread files([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
    }
  });
  const int before = open_descriptors();

  constexpr int kRounds = 200;
  for (int i = 0; i < kRounds; ++i) {
    std::promise<Result<std::vector<std::string>>> answer;
    loop.post([&] {
      auto resolver = std::make_shared<DnsResolver>(loop);
      // The resolver is destroyed on the next turn of the loop, with its nameserver sockets
      // open. That turn is queued before the answer below wakes this test's thread, so any post
      // the test makes after the answer runs after the destruction.
      loop.post([resolver]() mutable { resolver.reset(); });
      // A literal is answered inline, without a query.
      resolver->resolve(
          "127.0.0.1", [&](Result<std::vector<std::string>> r) { answer.set_value(std::move(r)); });
    });
    auto r = answer.get_future().get();
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r.value(), std::vector<std::string>{"127.0.0.1"});
  }
  // The last resolver is gone once a later post has run.
  std::promise<void> flushed;
  loop.post([&] { flushed.set_value(); });
  flushed.get_future().wait();
  stop = true;
  files.join();
  EXPECT_LE(open_descriptors(), before) << "a resolver left a descriptor open";
  loop.stop();
  runner.join();
}

}  // namespace
}  // namespace cutline::gateway
