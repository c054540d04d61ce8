#pragma once
// Listener: a listening TCP socket on one EventLoop (libevent evconnlistener) with SO_REUSEADDR
// and SO_REUSEPORT, so every worker can own a listener on the same address and port and the
// kernel spreads incoming connections across them. Accepted sockets are non-blocking, with
// TCP_NODELAY set.
//
// Threading and lifetime: open() on the loop's thread or before the loop runs; on_accept runs on
// the loop thread; destroy on the loop thread (or when the loop is not running). Destroying it
// closes the socket; no accept callback runs afterwards.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cutline/proto/result.h"

struct evconnlistener;
struct sockaddr;

namespace cutline::proto {

class EventLoop;

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

 private:
  Listener() = default;
  static void on_accept_cb(evconnlistener* l, int fd, ::sockaddr* addr, int len, void* arg);

  evconnlistener* listener_ = nullptr;
  AcceptFn on_accept_;
  uint16_t port_ = 0;
};

}  // namespace cutline::proto
