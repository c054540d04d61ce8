#include "cutline/proto/net/connection.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cutline/proto/net/event_loop.h"

namespace cutline::proto {

namespace {

// Direct reads: enough for many SSE events at once; one buffer per loop thread.
constexpr size_t kDirectReadBytes = 64 * 1024;
// Write batching holds at most this much per connection before sending.
constexpr size_t kMaxHeldBytes = 16 * 1024;

timeval to_timeval(int64_t ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

void set_nodelay(int fd) {
  if (fd < 0) return;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string socket_error_message(int err) {
  return err != 0 ? std::string(strerror(err)) : std::string("connection error");
}

// A TLS connection reports handshake and record errors in OpenSSL's queue, not errno ("" when
// there are none, and always for plain sockets).
std::string tls_error_message(bufferevent* bev) {
  std::string reason;
  while (unsigned long e = bufferevent_get_openssl_error(bev)) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    reason += reason.empty() ? "TLS: " : "; ";
    reason += buf;
  }
  return reason;
}

}  // namespace

WriteBatch::State& WriteBatch::state() {
  thread_local State s;
  return s;
}

WriteBatch::WriteBatch() { ++state().depth; }

WriteBatch::~WriteBatch() {
  State& s = state();
  if (--s.depth > 0) return;
  // Sending cannot run callbacks, so nothing is held anew while this runs.
  for (size_t i = 0; i < s.used; ++i) {
    if (Connection* c = s.held[i].connection) c->queue_held();
  }
  s.used = 0;
}

Connection::Connection(EventLoop& loop, bufferevent* bev, Handler& handler,
                       const ConnectionOptions& options)
    : loop_(loop),
      bev_(bev),
      handler_(&handler),
      high_water_bytes_(static_cast<uint32_t>(options.high_water_bytes)),
      low_water_bytes_(static_cast<uint32_t>(options.low_water_bytes)) {
  bufferevent_setcb(bev_, &Connection::read_cb, &Connection::write_cb, &Connection::event_cb, this);
  bufferevent_setwatermark(bev_, EV_WRITE, low_water_bytes_, 0);
}

Connection::Connection(EventLoop& loop, int fd, Handler& handler, const ConnectionOptions& options)
    : Connection(loop, bufferevent_socket_new(loop.base(), fd, BEV_OPT_CLOSE_ON_FREE), handler,
                 options) {
  set_nodelay(fd);
  fd_ = fd;
  direct_write_ = true;
  // Writing is enabled when something is first queued (write_queued()): enabling it now would
  // watch an empty output for writability, wake the loop once and stop watching again (two
  // epoll_ctl and a wake-up per connection for nothing).
  write_enabled_ = false;
  direct_read_ = options.direct_read;
  if (direct_read_) {
    update_direct_read();
  } else {
    bufferevent_enable(bev_, EV_READ);
  }
}

Connection::Connection(EventLoop& loop, int fd, ssl_st* ssl, Handler& handler,
                       const ConnectionOptions& options)
    : Connection(loop,
                 bufferevent_openssl_socket_new(loop.base(), fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                BEV_OPT_CLOSE_ON_FREE),
                 handler, options) {
  // Clients that close without close_notify (common) end as EOF, not as an error.
  bufferevent_openssl_set_allow_dirty_shutdown(bev_, 1);
  tls_ = true;  // the handshake's BEV_EVENT_CONNECTED must not turn on direct (plaintext) writes
  set_nodelay(fd);
  bufferevent_enable(bev_, EV_READ | EV_WRITE);
}

std::unique_ptr<Connection> Connection::connect(EventLoop& loop, const sockaddr* addr,
                                                socklen_t addr_len, int64_t connect_timeout_ms,
                                                Handler& handler, const ConnectionOptions& options,
                                                ssl_st* ssl) {
  // Upstream sockets are close-on-exec from their creation (SOCK_CLOEXEC), so that a process
  // started meanwhile (the supervised backend) never inherits one. libevent's own connect
  // creates its socket without the flag: the plain socket is made here and handed to it; the
  // TLS one is libevent's (bufferevent_openssl needs to create it) and is flagged right after.
  int fd = -1;
  if (ssl == nullptr) {
    fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return nullptr;
  }
  bufferevent* bev =
      ssl != nullptr ? bufferevent_openssl_socket_new(
                           loop.base(), -1, ssl, BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE)
                     : bufferevent_socket_new(loop.base(), fd, BEV_OPT_CLOSE_ON_FREE);
  if (bev == nullptr) {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) ::close(fd);
    return nullptr;
  }
  if (ssl != nullptr) bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
  std::unique_ptr<Connection> conn(new Connection(loop, bev, handler, options));
  conn->connecting_ = true;
  conn->tls_ = ssl != nullptr;
  conn->direct_read_ = options.direct_read && !conn->tls_;
  if (connect_timeout_ms > 0) {
    // While connecting, libevent waits for writability: the write timeout is the connect timeout.
    const timeval tv = to_timeval(connect_timeout_ms);
    bufferevent_set_timeouts(bev, nullptr, &tv);
  }
  if (bufferevent_socket_connect(bev, const_cast<sockaddr*>(addr), static_cast<int>(addr_len)) !=
      0) {
    return nullptr;
  }
  if (ssl != nullptr) evutil_make_socket_closeonexec(bufferevent_getfd(bev));
  set_nodelay(bufferevent_getfd(bev));
  return conn;
}

Connection::~Connection() { close(); }

void Connection::Handler::on_bytes(Connection& conn, std::string_view data) {
  conn.keep_input(data);
  on_readable(conn.input());
}

void Connection::write(std::string_view data) {
  if (bev_ == nullptr || data.empty()) return;
  if (held_slot_ >= 0 || (direct_write_ && !flushing_ && data.size() < kMaxHeldBytes &&
                          WriteBatch::state().depth > 0)) {
    return hold(data);
  }
  write_now(data);
}

void Connection::write_now(std::string_view data) {
  if (output_queued_ && output_bytes() == 0) output_queued_ = false;
  // Nothing queued: hand the bytes to the kernel now. Queuing them instead makes the bufferevent
  // start watching for writability (epoll_ctl), wait a loop turn, write, and stop watching again
  // (epoll_ctl): per token, on every stream. Only what the kernel does not take is queued (and
  // watched for); a failed send leaves it all queued and the bufferevent reports the error.
  if (direct_write_ && !flushing_ && !output_queued_) {
    const ssize_t sent = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      data.remove_prefix(static_cast<size_t>(sent));
      if (data.empty()) return;
    }
  }
  bufferevent_write(bev_, data.data(), data.size());
  note_written();
}

void Connection::hold(std::string_view data) {
  WriteBatch::State& s = WriteBatch::state();
  if (held_slot_ < 0) {
    if (s.used == s.held.size()) s.held.emplace_back();
    held_slot_ = static_cast<int>(s.used++);
    s.held[static_cast<size_t>(held_slot_)].connection = this;
  }
  std::string& bytes = s.held[static_cast<size_t>(held_slot_)].bytes;
  bytes.append(data);
  // A writer producing this much in one callback is streaming, not finishing a message: send now
  // so that back-pressure (output_bytes(), above_high_water()) sees what it wrote.
  if (bytes.size() >= kMaxHeldBytes) queue_held();
}

WriteBatch::Held* Connection::detach_held() {
  if (held_slot_ < 0) return nullptr;
  WriteBatch::Held& h = WriteBatch::state().held[static_cast<size_t>(held_slot_)];
  held_slot_ = -1;
  h.connection = nullptr;
  return &h;
}

void Connection::queue_held() {
  WriteBatch::Held* h = detach_held();
  if (h == nullptr) return;
  if (bev_ != nullptr && !h->bytes.empty()) write_now(h->bytes);
  h->bytes.clear();
}

void Connection::drop_held() {
  if (WriteBatch::Held* h = detach_held()) h->bytes.clear();
}

void Connection::write_queued() {
  output_queued_ = true;
  if (!write_enabled_ && !flushing_) {
    write_enabled_ = true;
    bufferevent_enable(bev_, EV_WRITE);
  }
}

void Connection::write_buffer(evbuffer* buffer) {
  if (bev_ == nullptr) return;
  queue_held();
  bufferevent_write_buffer(bev_, buffer);
  note_written();
}

evbuffer* Connection::output() {
  if (bev_ == nullptr) return nullptr;
  queue_held();  // the caller appends after them
  return bufferevent_get_output(bev_);
}

evbuffer* Connection::input() { return bev_ != nullptr ? bufferevent_get_input(bev_) : nullptr; }

void Connection::keep_input(std::string_view data) {
  if (bev_ == nullptr || data.empty()) return;
  // A socket bufferevent keeps the end of its input frozen except while it reads itself:
  // evbuffer_add() would refuse the bytes (and they would be lost) without the thaw.
  evbuffer* input = bufferevent_get_input(bev_);
  evbuffer_unfreeze(input, /*at_front=*/0);
  evbuffer_add(input, data.data(), data.size());
  evbuffer_freeze(input, /*at_front=*/0);
  input_kept_ = true;
}

void Connection::update_direct_read() {
  if (bev_ == nullptr || connecting_ || flushing_) return;
  if (read_event_ == nullptr) {
    read_event_ = event_new(loop_.base(), bufferevent_getfd(bev_), EV_READ | EV_PERSIST,
                            &Connection::direct_read_cb, this);
  }
  if (!reading_) {
    event_del(read_event_);
  } else if (read_timeout_ms_ > 0) {
    const timeval tv = to_timeval(read_timeout_ms_);
    event_add(read_event_, &tv);
  } else if (event_pending(read_event_, EV_READ, nullptr) == 0) {
    event_add(read_event_, nullptr);
  } else {
    // Already watched: only drop a timeout set before (event_add() without one would keep it;
    // event_del() + event_add() would cost two epoll_ctl per reuse of a pooled connection).
    event_remove_timer(read_event_);
  }
}

void Connection::free_direct_read() {
  if (read_event_ == nullptr) return;
  event_free(read_event_);
  read_event_ = nullptr;
}

void Connection::note_written() {
  if (bev_ == nullptr) return;
  write_queued();
  if (output_bytes() > high_water_bytes_) above_high_water_ = true;
}

size_t Connection::output_bytes() const {
  return bev_ != nullptr ? evbuffer_get_length(bufferevent_get_output(bev_)) : 0;
}

size_t Connection::input_bytes() const {
  return bev_ != nullptr ? evbuffer_get_length(bufferevent_get_input(bev_)) : 0;
}

void Connection::set_reading(bool enabled) {
  if (direct_read_) {
    if (reading_ == enabled) return;
    reading_ = enabled;
    return update_direct_read();
  }
  reading_ = enabled;
  if (bev_ == nullptr || flushing_ || connecting_) return;
  if (enabled) {
    bufferevent_enable(bev_, EV_READ);
  } else {
    bufferevent_disable(bev_, EV_READ);
  }
}

void Connection::set_read_timeout(int64_t timeout_ms) {
  read_timeout_ms_ = timeout_ms;
  // While connecting, the write timeout is the connect timeout: apply this once connected.
  if (bev_ == nullptr || flushing_ || connecting_) return;
  if (direct_read_) return update_direct_read();
  if (timeout_ms > 0) {
    const timeval tv = to_timeval(timeout_ms);
    bufferevent_set_timeouts(bev_, &tv, nullptr);
  } else {
    bufferevent_set_timeouts(bev_, nullptr, nullptr);
  }
}

void Connection::trigger_read() {
  if (bev_ == nullptr || evbuffer_get_length(bufferevent_get_input(bev_)) == 0) return;
  bufferevent_trigger(bev_, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

void Connection::close() {
  // Held bytes would have been sent already without the batch: send what the kernel takes now,
  // as write() would have, and drop the rest with the other unsent output.
  if (WriteBatch::Held* h = detach_held()) {
    if (bev_ != nullptr && direct_write_ && !flushing_ && output_bytes() == 0) {
      [[maybe_unused]] const ssize_t sent =
          ::send(fd_, h->bytes.data(), h->bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    h->bytes.clear();
  }
  if (bev_ == nullptr) return;
  free_direct_read();
  bufferevent_free(bev_);
  bev_ = nullptr;
}

void Connection::close_after_flush(int64_t linger_ms) {
  if (bev_ == nullptr || flushing_) return;
  queue_held();
  flushing_ = true;
  linger_ms_ = linger_ms;
  free_direct_read();  // the bufferevent reads (and discards) from here on
  bufferevent_setcb(bev_, &Connection::flush_read_cb, &Connection::flush_write_cb,
                    &Connection::flush_event_cb, this);
  bufferevent_setwatermark(bev_, EV_WRITE, 0, 0);
  bufferevent_set_timeouts(bev_, nullptr, nullptr);
  bufferevent_enable(bev_, EV_READ | EV_WRITE);
  if (output_bytes() == 0) finish_flush();
}

void Connection::finish_flush() {
  shutdown(bufferevent_getfd(bev_), SHUT_WR);
  const timeval tv = to_timeval(linger_ms_ > 0 ? linger_ms_ : 1);
  bufferevent_set_timeouts(bev_, &tv, nullptr);
}

std::string Connection::peer_address() const {
  if (bev_ == nullptr) return {};
  sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (getpeername(bufferevent_getfd(bev_), reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  char host[INET6_ADDRSTRLEN] = {0};
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return {};
}

void Connection::closed_by_peer(CloseReason reason, std::string message) {
  drop_held();
  free_direct_read();
  bufferevent_free(bev_);
  bev_ = nullptr;
  flushing_ = false;
  // Last statement: the handler may destroy this Connection.
  handler_->on_closed(reason, message);
}

void Connection::read_cb(bufferevent* bev, void* arg) {
  auto* self = static_cast<Connection*>(arg);
  WriteBatch batch;
  self->handler_->on_readable(bufferevent_get_input(bev));
}

void Connection::write_cb(bufferevent* /*bev*/, void* arg) {
  auto* self = static_cast<Connection*>(arg);
  WriteBatch batch;
  if (self->above_high_water_ && self->output_bytes() <= self->low_water_bytes_) {
    self->above_high_water_ = false;
    self->handler_->on_drained();
  }
}

void Connection::event_cb(bufferevent* bev, short what, void* arg) {
  auto* self = static_cast<Connection*>(arg);
  const int err = EVUTIL_SOCKET_ERROR();  // before anything else can touch errno
  WriteBatch batch;
  if ((what & BEV_EVENT_CONNECTED) != 0) {
    self->connecting_ = false;
    // Connected: a cleartext socket can take writes directly from now on (the request goes out
    // in this loop turn instead of after the next epoll_wait).
    self->fd_ = bufferevent_getfd(bev);
    self->direct_write_ = !self->tls_;
    if (self->direct_read_) {
      bufferevent_set_timeouts(bev, nullptr, nullptr);  // the connect timeout
      bufferevent_enable(bev, EV_WRITE);
      self->update_direct_read();
    } else {
      self->set_read_timeout(self->read_timeout_ms_);
      bufferevent_enable(bev, (self->reading_ ? EV_READ : 0) | EV_WRITE);
    }
    self->handler_->on_connected();
    return;
  }
  if (self->connecting_) {
    self->connecting_ = false;
    if ((what & BEV_EVENT_TIMEOUT) != 0) {
      self->closed_by_peer(CloseReason::kConnectTimeout, "connect timed out");
    } else if (err == ECONNREFUSED) {
      self->closed_by_peer(CloseReason::kConnectRefused, "connection refused");
    } else {
      const std::string tls_reason = tls_error_message(bev);
      self->closed_by_peer(
          CloseReason::kConnectFailed,
          "connect failed: " + (tls_reason.empty() ? socket_error_message(err) : tls_reason));
    }
    return;
  }
  if ((what & BEV_EVENT_TIMEOUT) != 0) {
    self->closed_by_peer(CloseReason::kTimeout, "read timed out");
  } else if ((what & BEV_EVENT_EOF) != 0) {
    self->closed_by_peer(CloseReason::kEof, "closed by peer");
  } else {
    const std::string tls_reason = tls_error_message(bev);
    self->closed_by_peer(CloseReason::kError,
                         tls_reason.empty() ? socket_error_message(err) : tls_reason);
  }
}

void Connection::direct_read_cb(int fd, short what, void* arg) {
  auto* self = static_cast<Connection*>(arg);
  if ((what & EV_TIMEOUT) != 0) {
    return self->closed_by_peer(CloseReason::kTimeout, "read timed out");
  }
  // One buffer per loop thread: handlers consume the bytes (or keep_input() them) before
  // returning, and no read callback runs inside another.
  thread_local char buffer[kDirectReadBytes];
  WriteBatch batch;
  for (uint8_t i = 0; i < self->prefetch_count_; ++i) {
    const PrefetchSpan& span = self->prefetch_[i];
    const char* p = static_cast<const char*>(span.at);
    if (p == nullptr) continue;
    for (uint32_t off = 0; off < span.bytes; off += 64) __builtin_prefetch(p + off);
  }
  const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
  if (n > 0) {
    const std::string_view data(buffer, static_cast<size_t>(n));
    evbuffer* input = self->input_kept_ ? bufferevent_get_input(self->bev_) : nullptr;
    if (input != nullptr && evbuffer_get_length(input) != 0) {
      // Older bytes are still waiting: keep the order.
      evbuffer_add(input, data.data(), data.size());
      return self->handler_->on_readable(input);
    }
    self->input_kept_ = false;
    return self->handler_->on_bytes(*self, data);
  }
  if (n == 0) return self->closed_by_peer(CloseReason::kEof, "closed by peer");
  const int err = errno;
  if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) return;
  self->closed_by_peer(CloseReason::kError, socket_error_message(err));
}

void Connection::flush_read_cb(bufferevent* bev, void* /*arg*/) {
  evbuffer* input = bufferevent_get_input(bev);
  evbuffer_drain(input, evbuffer_get_length(input));
}

void Connection::flush_write_cb(bufferevent* bev, void* arg) {
  auto* self = static_cast<Connection*>(arg);
  if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) self->finish_flush();
}

void Connection::flush_event_cb(bufferevent* /*bev*/, short /*what*/, void* arg) {
  auto* self = static_cast<Connection*>(arg);
  self->closed_by_peer(CloseReason::kFlushed, "closed after flush");
}

}  // namespace cutline::proto
