// Upstream names resolve off the relay path: a nameserver that never answers delays only the
// request to that name, while another stream on the same loop keeps relaying at its own pace.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <poll.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http/http_server.h"
#include "cutline/proto/net/timer.h"
#include "net_test_util.h"

namespace cutline::proto {
namespace {

using Clock = std::chrono::steady_clock;

// A UDP "nameserver" on loopback that reads queries and never answers.
class SilentNameserver {
 public:
  SilentNameserver() {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentNameserver() { close(fd_); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// Streams `count` chunks, one every `gap_ms`, per request.
struct Ticker {
  std::shared_ptr<ServerStream> stream;
  std::unique_ptr<Timer> timer;
  int sent = 0;
};

TEST(DnsResolverTest, AStalledNameserverDoesNotStallOtherStreamsOnTheLoop) {
  std::vector<std::unique_ptr<Ticker>> tickers;  // outlive the server (destroyed after stop)
  HttpServer server(ServerOptions{}, [&](std::shared_ptr<ServerStream> s) {
    s->send_head(200, {{"Content-Type", "text/plain"}}, BodyFraming::chunked());
    auto ticker = std::make_unique<Ticker>();
    Ticker* t = ticker.get();
    t->stream = s;
    t->timer = std::make_unique<Timer>(s->loop(), [t] {
      t->stream->send_body("tick\n");
      if (++t->sent == 20) {
        t->stream->finish({});
        t->timer->cancel();
      }
    });
    t->timer->arm_periodic(50);
    tickers.push_back(std::move(ticker));
  });
  ASSERT_TRUE(server.start().ok());
  SilentNameserver nameserver;

  WorkerThreads workers(1);
  workers.start();
  std::unique_ptr<HttpClient> client;
  testing::Notes notes;
  std::vector<int64_t> tick_ms;  // arrival of each body piece, ms since start
  bool stream_done = false;
  int64_t resolve_failed_ms = -1;
  ClientErrorKind resolve_error = ClientErrorKind::kConnectFailed;
  ClientHandle stalled;
  ClientHandle streaming;
  const auto start = Clock::now();
  auto now_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  };
  workers.run_on_all_and_wait([&](EventLoop& loop) {
    ClientOptions options;
    options.dns_nameservers = {nameserver.address()};
    options.dns_timeout_ms = 2000;
    client = std::make_unique<HttpClient>(loop, options);
    ClientRequest named;
    named.host = "upstream.cutline-test.invalid";
    named.port = 9;
    ClientCallbacks named_cb;
    named_cb.on_error = [&](const ClientError& e) {
      notes.update([&] {
        resolve_failed_ms = now_ms();
        resolve_error = e.kind;
      });
    };
    stalled = client->start(std::move(named), std::move(named_cb));
    ClientRequest direct;
    direct.host = "127.0.0.1";
    direct.port = server.port();
    ClientCallbacks direct_cb;
    direct_cb.on_body = [&](std::string_view) {
      notes.update([&] { tick_ms.push_back(now_ms()); });
    };
    direct_cb.on_complete = [&](HttpHeaders&) { notes.update([&] { stream_done = true; }); };
    direct_cb.on_error = [&](const ClientError&) { notes.update([&] { stream_done = true; }); };
    streaming = client->start(std::move(direct), std::move(direct_cb));
  });
  ASSERT_TRUE(notes.wait_for([&] { return stream_done && resolve_failed_ms >= 0; }, 10000));
  workers.run_on_all_and_wait([&](EventLoop&) {
    stalled = ClientHandle();
    streaming = ClientHandle();
    client.reset();
  });
  workers.stop();
  server.stop();

  // The stream's 20 chunks came at their 50 ms pace while the lookup hung for 2 s.
  ASSERT_GE(tick_ms.size(), 10u);
  int64_t max_gap = 0;
  for (size_t i = 1; i < tick_ms.size(); ++i)
    max_gap = std::max(max_gap, tick_ms[i] - tick_ms[i - 1]);
  EXPECT_LT(max_gap, 500) << "relay stalled behind the resolver";
  EXPECT_LT(tick_ms.back(), resolve_failed_ms);
  EXPECT_EQ(resolve_error, ClientErrorKind::kResolve);
  EXPECT_GE(resolve_failed_ms, 1500);
}

// A UDP nameserver on loopback that answers every A query with 127.0.0.1 (and AAAA with no
// address), counting the queries.
class LoopbackNameserver {
 public:
  LoopbackNameserver() {
    fd_ = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~LoopbackNameserver() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int a_queries() const { return a_queries_.load(); }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      unsigned char q[512];
      sockaddr_in from{};
      socklen_t from_len = sizeof(from);
      const ssize_t n =
          recvfrom(fd_, q, sizeof(q), 0, reinterpret_cast<sockaddr*>(&from), &from_len);
      if (n < 17) continue;
      size_t at = 12;
      while (at < static_cast<size_t>(n) && q[at] != 0) at += q[at] + 1;
      const size_t question_end = at + 5;
      if (question_end > static_cast<size_t>(n)) continue;
      const int qtype = (q[at + 1] << 8) | q[at + 2];
      std::string r(reinterpret_cast<char*>(q), question_end);
      r[2] = static_cast<char>(0x81);  // response, recursion desired
      r[3] = static_cast<char>(0x80);  // recursion available, no error
      r[6] = 0;
      r[7] = qtype == 1 ? 1 : 0;  // answers
      r[8] = r[9] = r[10] = r[11] = 0;
      if (qtype == 1) {
        ++a_queries_;
        const unsigned char answer[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1};
        r.append(reinterpret_cast<const char*>(answer), sizeof(answer));
      }
      sendto(fd_, r.data(), r.size(), 0, reinterpret_cast<sockaddr*>(&from), from_len);
    }
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> a_queries_{0};
  std::thread thread_;
};

TEST(DnsResolverTest, ANameResolvesOnceAndIsReusedFromTheCache) {
  HttpServer server(ServerOptions{},
                    [](std::shared_ptr<ServerStream> s) { s->send_simple(200, {}, "ok"); });
  ASSERT_TRUE(server.start().ok());
  LoopbackNameserver nameserver;
  WorkerThreads workers(1);
  workers.start();
  std::unique_ptr<HttpClient> client;
  testing::Notes notes;
  std::vector<int> statuses;
  std::string error;
  std::vector<ClientHandle> handles;
  auto fetch = [&] {
    ClientRequest r;
    r.host = "upstream.cutline-test.invalid";
    r.port = server.port();
    ClientCallbacks cb;
    cb.on_head = [&](int s, HttpHeaders&) { notes.update([&] { statuses.push_back(s); }); };
    cb.on_error = [&](const ClientError& e) { notes.update([&] { error = e.message; }); };
    handles.push_back(client->start(std::move(r), std::move(cb)));
  };
  workers.run_on_all_and_wait([&](EventLoop& loop) {
    ClientOptions options;
    options.dns_nameservers = {nameserver.address()};
    client = std::make_unique<HttpClient>(loop, options);
    fetch();
    fetch();  // the same name in flight: one lookup
  });
  EXPECT_TRUE(notes.wait_for([&] { return statuses.size() == 2 || !error.empty(); })) << error;
  workers.run_on_all_and_wait([&](EventLoop&) { fetch(); });  // from the cache
  EXPECT_TRUE(notes.wait_for([&] { return statuses.size() == 3 || !error.empty(); })) << error;
  workers.run_on_all_and_wait([&](EventLoop&) {
    handles.clear();
    client.reset();
  });
  workers.stop();
  EXPECT_EQ(statuses, (std::vector<int>{200, 200, 200})) << error;
  EXPECT_EQ(nameserver.a_queries(), 1);
}

}  // namespace
}  // namespace cutline::proto
