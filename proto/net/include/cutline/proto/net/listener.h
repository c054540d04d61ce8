#pragma once
// Listener: a listening TCP socket on one EventLoop (libevent evconnlistener) with SO_REUSEADDR
// and SO_REUSEPORT, so every worker can own a listener on the same address and port and the
// kernel spreads incoming connections across them. Accepted sockets are non-blocking, with
// TCP_NODELAY set.
//
// Out of descriptors: when accept() fails with EMFILE, ENFILE, ENOBUFS or ENOMEM the pending
// connection stays in the kernel's backlog and the socket stays readable, so a listener that
// simply retried would spin the loop. Instead it stops listening for a back-off (10 ms, doubling
// to 1 s while accept keeps failing, reset by a successful accept) and then tries again.
//
// Threading and lifetime: open() on the loop's thread or before the loop runs; on_accept runs on
// the loop thread; destroy on the loop thread (or when the loop is not running). Destroying it
// closes the socket; no accept callback runs afterwards.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cutline/base/result.h"

struct evconnlistener;
struct sockaddr;

namespace cutline::proto {

class EventLoop;
class Timer;

class Listener {
 public:
  // Called with a connected socket the callee now owns (must close it).
  using AcceptFn = std::function<void(int fd)>;

  // Binds `address` (IPv4 "127.0.0.1", "0.0.0.0"; IPv6 "::1") and `port` (0 = any free port;
  // port() reports the one bound). Errors: kIo with the system message (address in use, bad
  // address).
  static Result<std::unique_ptr<Listener>> open(EventLoop& loop, std::string_view address,
                                                uint16_t port, int backlog, AcceptFn on_accept);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  uint16_t port() const { return port_; }
  // Called on the loop thread each time accepting pauses for lack of descriptors.
  void set_on_backoff(std::function<void()> fn) { on_backoff_ = std::move(fn); }
  // Back-offs so far (any thread).
  uint64_t backoffs() const { return backoffs_.load(std::memory_order_relaxed); }
  // Failed accept() calls so far, of any kind (any thread).
  uint64_t accept_errors() const { return accept_errors_.load(std::memory_order_relaxed); }

 private:
  explicit Listener(EventLoop& loop);
  static void on_accept_cb(evconnlistener* l, int fd, ::sockaddr* addr, int len, void* arg);
  static void on_error_cb(evconnlistener* l, void* arg);

  EventLoop& loop_;
  evconnlistener* listener_ = nullptr;
  AcceptFn on_accept_;
  std::function<void()> on_backoff_;
  std::unique_ptr<Timer> resume_timer_;  // armed while paused for a back-off
  int64_t backoff_ms_ = 0;               // the current back-off (0: none since the last accept)
  std::atomic<uint64_t> backoffs_{0};
  std::atomic<uint64_t> accept_errors_{0};
  uint16_t port_ = 0;
};

}  // namespace cutline::proto
