// Out of descriptors: accept() fails with EMFILE while connections wait in the backlog. The
// listener pauses for a back-off instead of spinning on the readable socket, and serves the
// waiting connections once descriptors are free again.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/time.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cutline/proto/http/http_server.h"
#include "cutline/proto/net/descriptor_limit.h"
#include "cutline/proto/net/listener.h"
#include "net_test_util.h"

// Sanitizer runtimes (weak: absent from plain builds) open their report file on the first report.
extern "C" const char* __sanitizer_get_report_path() __attribute__((weak));

namespace cutline::proto {
namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Lowers RLIMIT_NOFILE for the test's life and fills every free descriptor below it, so the next
// accept() fails with EMFILE; free() gives some back. Restores the limit at the end.
class DescriptorsExhausted {
 public:
  DescriptorsExhausted() {
    // Under a sanitizer that logs to a file, open that file now: a report made while no
    // descriptor is free would otherwise end the process with "Can't open file" and no report.
    if (__sanitizer_get_report_path != nullptr) __sanitizer_get_report_path();
    getrlimit(RLIMIT_NOFILE, &saved_);
    int highest = 0;
    for (int fd = 0; fd < 4096; ++fd) {
      if (fcntl(fd, F_GETFD) != -1) highest = fd;
    }
    rlimit low = saved_;
    low.rlim_cur = static_cast<rlim_t>(highest + 64);
    setrlimit(RLIMIT_NOFILE, &low);
  }
  // Fills what is left (call after the test's own sockets exist).
  void fill() {
    for (;;) {
      const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      held_.push_back(fd);
    }
  }
  void free(size_t n) {
    for (size_t i = 0; i < n && !held_.empty(); ++i) {
      ::close(held_.back());
      held_.pop_back();
    }
  }
  ~DescriptorsExhausted() {
    free(held_.size());
    setrlimit(RLIMIT_NOFILE, &saved_);
  }

 private:
  rlimit saved_{};
  std::vector<int> held_;
};

TEST(AcceptBackoffTest, OutOfDescriptorsTheListenerBacksOffInsteadOfSpinning) {
  ServerOptions o;
  o.http2 = false;
  std::atomic<int> backoffs{0};
  o.on_refused = [&](std::string_view reason) {
    if (reason == "accept_backoff") ++backoffs;
  };
  HttpServer server(o, [](std::shared_ptr<ServerStream> s) { s->send_simple(200, {}, "ok"); });
  ASSERT_TRUE(server.start().ok());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server.port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // One request served first: the worker thread runs before descriptors run out (UBSan's vptr
  // check of a starting thread probes memory through a pipe, which fails with EMFILE).
  {
    const int warm = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(warm, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    testing::send_all(warm, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    const std::string answer = testing::recv_until(warm, testing::has_head_end, 5000);
    ASSERT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
    close(warm);
  }
  std::vector<int> clients;
  {
    DescriptorsExhausted exhausted;
    for (int i = 0; i < 3; ++i) clients.push_back(socket(AF_INET, SOCK_STREAM, 0));
    exhausted.fill();
    for (int fd : clients) {
      ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
      testing::send_all(fd, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    }
    // The server cannot accept them. Spinning would burn a core for the whole wait.
    const double cpu_before = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    const double cpu_used = cpu_seconds() - cpu_before;
    EXPECT_GT(server.accept_backoffs(), 0u);
    EXPECT_GT(backoffs.load(), 0);
    // 10 ms doubling to 1 s: a handful of retries in 600 ms, not thousands.
    EXPECT_LT(server.accept_backoffs(), 20u);
    EXPECT_LT(cpu_used, 0.2) << "the loop spun on EMFILE";
    exhausted.free(16);
    // Descriptors are back: the waiting connections are served after the back-off.
    for (int fd : clients) {
      const std::string answer = testing::recv_until(fd, testing::has_head_end, 5000);
      EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
    }
  }
  for (int fd : clients) close(fd);
}

TEST(AcceptBackoffTest, TheSoftDescriptorLimitIsRaisedToTheHardLimit) {
  rlimit saved{};
  getrlimit(RLIMIT_NOFILE, &saved);
  if (saved.rlim_max == RLIM_INFINITY || saved.rlim_max < 512) {
    GTEST_SKIP() << "the hard limit leaves nothing to raise";
  }
  rlimit low = saved;
  low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const DescriptorLimit d = raise_descriptor_limit();
  rlimit now{};
  getrlimit(RLIMIT_NOFILE, &now);
  setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_TRUE(d.error.empty()) << d.error;
  EXPECT_EQ(d.before, 256u);
  EXPECT_EQ(d.after, static_cast<uint64_t>(saved.rlim_max));
  EXPECT_EQ(now.rlim_cur, saved.rlim_max);
}

}  // namespace
}  // namespace cutline::proto
