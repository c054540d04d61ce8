// Overload: past the connection cap or the request-memory budget, new work is refused at once
// with a labeled 503, and the streams already running keep their pace. The real cutline-gateway
// in front of cutline-fake-upstream pacing tokens 20 ms apart; running streams' inter-token gaps
// are measured at the client, once alone and once while a flood of new connections (far past
// limits.max_connections) and oversized requests (past limits.max_request_memory_bytes) hits the
// same gateway. The bound (p95 gap under 5x the pacing) holds on a busy 2-core machine and fails
// when the running streams wait behind the flood.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

constexpr int kStreams = 4;
constexpr int kTokens = 50;
constexpr int kIntervalMs = 20;
constexpr int kMaxConnections = 8;

std::string policy_yaml(uint16_t fake_port, const std::string& log_path) {
  return "listen:\n  - address: 127.0.0.1:0\n"
         "admin:\n  address: 127.0.0.1:0\n"
         "access_log: " +
         log_path +
         "\n"
         "limits:\n  max_connections: " +
         std::to_string(kMaxConnections) +
         "\n  max_body_bytes: 65536\n  max_request_memory_bytes: 65536\n"
         "upstreams:\n  - name: fake\n    url: http://127.0.0.1:" +
         std::to_string(fake_port) +
         "\n    models: [\"fake\", \"fake-*\"]\n"
         "policies:\n  - name: default\n    match: {}\n    idle_timeout: 2s\n";
}

std::string chat_body() {
  return R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"stream":true})";
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// One running stream read on its own thread: the arrival time of every SSE data event.
struct PacedStream {
  std::vector<double> arrivals_ms;
  std::string received;
  std::thread reader;

  void start(uint16_t port) {
    reader = std::thread([this, port] {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(fd);
        return;
      }
      const std::string script =
          "tokens=" + std::to_string(kTokens) + ",interval_ms=" + std::to_string(kIntervalMs);
      const std::string req =
          http_post_raw("/v1/chat/completions", chat_body(), "X-Fake-Script: " + script + "\r\n");
      if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
        ::close(fd);
        return;
      }
      timeval tv{10, 0};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      const auto t0 = std::chrono::steady_clock::now();
      size_t seen = 0;
      char buf[16384];
      // Blocking reads: each event's arrival is stamped when recv() returns it.
      while (received.find("data: [DONE]") == std::string::npos) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        const double now = ms_since(t0);
        received.append(buf, static_cast<size_t>(n));
        size_t pos;
        while ((pos = received.find("data: {", seen)) != std::string::npos) {
          arrivals_ms.push_back(now);
          seen = pos + 1;
        }
      }
      ::close(fd);
    });
  }
  // Gaps between consecutive content tokens (the first event's wait for the head is not a gap).
  std::vector<double> gaps() const {
    std::vector<double> g;
    for (size_t i = 2; i < arrivals_ms.size(); ++i)
      g.push_back(arrivals_ms[i] - arrivals_ms[i - 1]);
    return g;
  }
};

double p95(std::vector<double> v) {
  if (v.empty()) return 1e9;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(0.95 * static_cast<double>(v.size())))];
}

// Runs kStreams paced streams (while `during` runs beside them) and returns every gap.
std::vector<double> run_streams(uint16_t port, const std::function<void()>& during = {}) {
  std::vector<PacedStream> streams(kStreams);
  for (auto& s : streams) s.start(port);
  if (during) during();
  std::vector<double> gaps;
  for (auto& s : streams) {
    s.reader.join();
    EXPECT_NE(s.received.find("\"cause\":\"eos\""), std::string::npos)
        << "a running stream did not end with eos: " << s.received.substr(0, 400);
    const auto g = s.gaps();
    EXPECT_GE(g.size(), static_cast<size_t>(kTokens - 3));
    gaps.insert(gaps.end(), g.begin(), g.end());
  }
  return gaps;
}

TEST(GatewayOverload, NewWorkIsRefusedAtOnceAndRunningStreamsKeepTheirPace) {
  GatewayEnv env;
  ASSERT_TRUE(env.start(policy_yaml)) << env.error;

  const std::vector<double> alone = run_streams(env.port);
  const double alone_p95 = p95(alone);

  std::atomic<bool> stop{false};
  std::atomic<int> refused_connections{0}, refused_memory{0}, other{0}, unanswered{0};
  std::mutex mu;
  std::vector<double> refusal_ms;
  std::vector<std::string> odd;
  std::vector<std::thread> flood;
  const std::vector<double> flooded = run_streams(env.port, [&] {
    // Let the running streams start (they hold 4 of the 8 connections), then flood.
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    for (int t = 0; t < 6; ++t) {
      flood.emplace_back([&, t] {
        while (!stop.load()) {
          const auto t0 = std::chrono::steady_clock::now();
          RawClient c(env.port);
          if (t % 3 == 0) {
            // Oversized: a declared body the memory budget cannot hold next to another one.
            c.send_all(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                "application/json\r\nContent-Length: 65536\r\n\r\n{");
          } else {
            c.post("/v1/chat/completions", chat_body(), "X-Fake-Script: tokens=1\r\n");
          }
          const std::string r = c.read_until("\"code\"", 3000);
          const double took = ms_since(t0);
          std::lock_guard lock(mu);
          if (r.find("too_many_connections") != std::string::npos) {
            ++refused_connections;
            refusal_ms.push_back(took);
          } else if (r.rfind("HTTP/1.1 503", 0) == 0) {
            ++refused_memory;
            refusal_ms.push_back(took);
          } else if (r.empty()) {
            // Closed with no answer: the cap's 503 is written and the socket closed at once, so
            // a request that arrives in between resets the connection under the answer.
            ++unanswered;
          } else if (r.rfind("HTTP/1.1 200", 0) != 0 && r.rfind("HTTP/1.1 408", 0) != 0 &&
                     odd.size() < 5) {
            ++other;
            odd.push_back(r.substr(0, 200));
          }
        }
      });
    }
  });
  stop = true;
  for (auto& t : flood) t.join();

  const double flooded_p95 = p95(flooded);
  std::printf(
      "inter-token gap p95: alone %.1f ms, flooded %.1f ms (pacing %d ms); refused: %d "
      "connections, %d memory, %d unanswered; refusal p95 %.1f ms\n",
      alone_p95, flooded_p95, kIntervalMs, refused_connections.load(), refused_memory.load(),
      unanswered.load(), p95(refusal_ms));
  // The flood was real: far past the cap, and refused with labeled 503s.
  EXPECT_GT(refused_connections.load(), 50);
  EXPECT_GT(refused_memory.load(), 0);
  EXPECT_EQ(other.load(), 0) << (odd.empty() ? "" : odd.front());
  EXPECT_LT(unanswered.load(), 1 + refused_connections.load() / 100);
  // At once: a refusal does not wait for a slot.
  EXPECT_LT(p95(refusal_ms), 250.0);
  // The running streams kept their pace (starved streams would see gaps of hundreds of ms).
  EXPECT_LT(flooded_p95, 5.0 * kIntervalMs);

  const auto m = proto::http_fetch(env.admin_url("/metrics"));
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->body.find("cutline_refused_total{reason=\"connections\"}"), std::string::npos);
  // The memory budget's 503 is a request the gateway answered: it has its stop record.
  EXPECT_NE(read_file(env.log_path).find("\"status\":503"), std::string::npos);
  env.stop();
}

}  // namespace
}  // namespace cutline::test
