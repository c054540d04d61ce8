#include "cutline/proto/listener.h"

#include <arpa/inet.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "cutline/proto/event_loop.h"

namespace cutline::proto {

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
  std::unique_ptr<Listener> listener(new Listener());
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
  if (listener_ != nullptr) evconnlistener_free(listener_);
}

void Listener::on_accept_cb(evconnlistener* /*l*/, int fd, sockaddr* /*addr*/, int /*len*/,
                            void* arg) {
  auto* self = static_cast<Listener*>(arg);
  self->on_accept_(fd);
}

}  // namespace cutline::proto
