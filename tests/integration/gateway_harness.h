#pragma once
// Test harness for gateway integration tests: starts the real cutline-fake-upstream and
// cutline-gateway binaries on loopback (free ports), writes the policy file, and offers a client
// the way a user would have one (blocking http_fetch, or a raw socket for disconnects and slow
// reads), plus readers for the access log and /metrics.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cutline/proto/http_fetch.h"
#include "cutline/proto/openai_chunk.h"
#include "cutline/proto/sse_parser.h"
#include "cutline/proto/stop_record.h"
#include "process_harness.h"

namespace cutline::test {

// The last SSE data payload before [DONE] (the chunk carrying the stop record).
inline std::string last_chunk(const std::string& sse_body) {
  proto::SseParser p;
  std::string_view in = sse_body;
  std::string last;
  for (;;) {
    auto s = p.next(in);
    if (s != proto::SseParser::Step::kEvent) break;
    if (!p.event().done) last = std::string(p.event().data);
  }
  return last;
}

// Every SSE data payload (except [DONE]) in order; `done` tells whether [DONE] was seen.
inline std::vector<std::string> sse_payloads(const std::string& sse_body, bool* done = nullptr) {
  proto::SseParser p;
  std::string_view in = sse_body;
  std::vector<std::string> out;
  if (done) *done = false;
  for (;;) {
    auto s = p.next(in);
    if (s != proto::SseParser::Step::kEvent) break;
    if (p.event().done) {
      if (done) *done = true;
    } else {
      out.emplace_back(p.event().data);
    }
  }
  return out;
}

// A raw loopback connection for clients that misbehave (disconnect, read slowly).
class RawClient {
 public:
  explicit RawClient(uint16_t port, int rcvbuf = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() { close(); }
  bool connected() const { return connected_; }
  void send_all(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  // Reads until `needle` appears in what was received or timeout; returns everything read.
  std::string read_until(const std::string& needle, int timeout_ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    timeval tv{0, 20000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    while (std::chrono::steady_clock::now() < end && received_.find(needle) == std::string::npos) {
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) break;
      if (n > 0) received_.append(buf, static_cast<size_t>(n));
    }
    return received_;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

inline std::string http_post_raw(const std::string& path, const std::string& body,
                                 const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

inline uint16_t free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A fake upstream and a gateway in front of it, in a fresh temp dir. `yaml` writes the policy
// given the fake's port and the access-log path.
struct GatewayEnv {
  std::string dir;
  Process fake;
  Process gateway;
  uint16_t fake_port = 0;
  uint16_t port = 0;
  uint16_t admin_port = 0;
  std::string log_path;
  std::string config_path;
  std::string error;  // why start() failed

  bool start(const std::function<std::string(uint16_t, const std::string&)>& yaml) {
    dir = make_temp_dir();
    fake.start({CUTLINE_FAKE_UPSTREAM_BIN, "--port", "0"}, dir + "/fake.out", dir + "/fake.err");
    if (!wait_for([&] {
          const std::string out = read_file(dir + "/fake.out");
          return out.rfind("PORT ", 0) == 0 && out.find('\n') != std::string::npos;
        })) {
      error = "fake upstream did not start: " + read_file(dir + "/fake.err");
      return false;
    }
    fake_port = static_cast<uint16_t>(std::atoi(read_file(dir + "/fake.out").c_str() + 5));
    log_path = dir + "/access.log";
    config_path = dir + "/cutline.yaml";
    std::ofstream(config_path) << yaml(fake_port, log_path);
    gateway.start(
        {CUTLINE_GATEWAY_BIN, "--config", config_path, "--ready-file", dir + "/ready.json"},
        dir + "/gateway.out", dir + "/gateway.err");
    if (!wait_for([&] { return !read_file(dir + "/ready.json").empty(); })) {
      error = "gateway did not start: " + read_file(dir + "/gateway.err");
      return false;
    }
    const std::string ready = read_file(dir + "/ready.json");
    port = static_cast<uint16_t>(std::atoi(ready.c_str() + ready.find(':') + 1));
    admin_port = static_cast<uint16_t>(std::atoi(ready.c_str() + ready.rfind(':') + 1));
    return true;
  }
  void stop() {
    gateway.stop();
    fake.stop();
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port) + path;
  }
  std::string admin_url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(admin_port) + path;
  }
  std::string fake_url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(fake_port) + path;
  }
};

}  // namespace cutline::test
