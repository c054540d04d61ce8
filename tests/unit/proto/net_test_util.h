#pragma once
// Helpers for the proto/ network tests: waiting on conditions set by loop threads (no sleeps),
// a client loop thread, and blocking raw sockets for peers that misbehave on purpose.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "cutline/proto/http/http_client.h"
#include "cutline/proto/net/worker_threads.h"

namespace cutline::proto::testing {

// Shared state guarded by a mutex; loop threads update it, the test thread waits on it.
class Notes {
 public:
  void update(const std::function<void()>& fn) {
    std::lock_guard<std::mutex> lock(mutex_);
    fn();
    cv_.notify_all();
  }
  // Waits until pred() (evaluated under the lock) holds; false after timeout_ms.
  bool wait_for(const std::function<bool()>& pred, int timeout_ms = 5000) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), pred);
  }
  template <typename T>
  T read(const std::function<T()>& fn) {
    std::lock_guard<std::mutex> lock(mutex_);
    return fn();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
};

// One loop thread with an HttpClient on it.
class ClientThread {
 public:
  ClientThread() : workers_(1) {
    workers_.start();
    run([this] { client_ = std::make_unique<HttpClient>(workers_.loop(0)); });
  }
  ~ClientThread() {
    run([this] { client_.reset(); });
    workers_.stop();
  }
  // Runs fn on the client loop and waits for it.
  void run(const std::function<void()>& fn) {
    workers_.run_on_all_and_wait([&](EventLoop&) { fn(); });
  }
  HttpClient& client() { return *client_; }
  EventLoop& loop() { return workers_.loop(0); }

 private:
  WorkerThreads workers_;
  std::unique_ptr<HttpClient> client_;
};

inline int connect_raw(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// Reads until `done(received)` or EOF or timeout; returns what arrived.
inline std::string recv_until(int fd, const std::function<bool(const std::string&)>& done,
                              int timeout_ms = 5000) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[16384];
  while (!done(out)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Reads until the peer closes (or timeout).
inline std::string recv_all(int fd, int timeout_ms = 5000) {
  return recv_until(
      fd, [](const std::string&) { return false; }, timeout_ms);
}

// A blocking listener on 127.0.0.1:0 for scripted upstreams.
class RawServer {
 public:
  RawServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 16);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~RawServer() { close(fd_); }
  uint16_t port() const { return port_; }
  // Accepts one connection (-1 after timeout).
  int accept_one(int timeout_ms = 5000) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return -1;
    return accept(fd_, nullptr, nullptr);
  }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

inline bool has_head_end(const std::string& s) { return s.find("\r\n\r\n") != std::string::npos; }

}  // namespace cutline::proto::testing
