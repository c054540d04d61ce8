#include "cutline/proto/net/listener.h"

#include <arpa/inet.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/timer.h"

namespace cutline::proto {

namespace {

constexpr int64_t kFirstBackoffMs = 10;
constexpr int64_t kMaxBackoffMs = 1000;

}  // namespace

Listener::Listener(EventLoop& loop) : loop_(loop) {}

Result<std::unique_ptr<Listener>> Listener::open(EventLoop& loop, std::string_view address,
                                                 uint16_t port, int backlog, AcceptFn on_accept) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  const std::string host(address);
  auto* in4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, host.c_str(), &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
  } else {
    return Error{ErrorKind::kIo, "listen address is not an IP address: " + host};
  }
  std::unique_ptr<Listener> listener(new Listener(loop));
  listener->on_accept_ = std::move(on_accept);
  const unsigned flags =
      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT | LEV_OPT_CLOSE_ON_EXEC;
  errno = 0;
  listener->listener_ =
      evconnlistener_new_bind(loop.base(), &Listener::on_accept_cb, listener.get(), flags, backlog,
                              reinterpret_cast<sockaddr*>(&ss), static_cast<int>(len));
  if (listener->listener_ == nullptr) {
    const int err = errno;
    return Error{ErrorKind::kIo, "cannot listen on " + host + ":" + std::to_string(port) + ": " +
                                     (err != 0 ? strerror(err) : "unknown error")};
  }
  evconnlistener_set_error_cb(listener->listener_, &Listener::on_error_cb);
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  getsockname(evconnlistener_get_fd(listener->listener_), reinterpret_cast<sockaddr*>(&bound),
              &bound_len);
  listener->port_ = bound.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                        : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return listener;
}

Listener::~Listener() {
  resume_timer_.reset();
  if (listener_ != nullptr) evconnlistener_free(listener_);
}

void Listener::on_accept_cb(evconnlistener* /*l*/, int fd, sockaddr* /*addr*/, int /*len*/,
                            void* arg) {
  auto* self = static_cast<Listener*>(arg);
  self->backoff_ms_ = 0;
  self->on_accept_(fd);
}

void Listener::on_error_cb(evconnlistener* l, void* arg) {
  auto* self = static_cast<Listener*>(arg);
  const int err = EVUTIL_SOCKET_ERROR();
  self->accept_errors_.fetch_add(1, std::memory_order_relaxed);
  if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM) return;  // transient
  evconnlistener_disable(l);
  self->backoff_ms_ =
      self->backoff_ms_ == 0 ? kFirstBackoffMs : std::min(self->backoff_ms_ * 2, kMaxBackoffMs);
  self->backoffs_.fetch_add(1, std::memory_order_relaxed);
  if (self->resume_timer_ == nullptr) {
    self->resume_timer_ = std::make_unique<Timer>(self->loop_, [self] {
      if (self->listener_ != nullptr) evconnlistener_enable(self->listener_);
    });
  }
  self->resume_timer_->arm(self->backoff_ms_);
  if (self->on_backoff_) self->on_backoff_();
}

}  // namespace cutline::proto
