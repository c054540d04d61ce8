#include "cutline/proto/http/http_server.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "cutline/proto/net/connection.h"
#include "cutline/proto/net/listener.h"
#include "cutline/proto/net/timer.h"
#include "cutline/proto/tls/tls_context.h"
#include "http1_server_connection.h"
#include "http2_server_connection.h"
#include "server_connection.h"

namespace cutline::proto {

namespace {

constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// The connection cap's answer, sent without reading the request: one send() on a fresh socket,
// then its write side is shut and the socket lingers briefly (Worker::linger).
constexpr std::string_view kOverloadedBody =
    "{\"error\":{\"message\":\"the server has too many open connections; retry later\","
    "\"type\":\"service_unavailable_error\",\"param\":null,\"code\":\"too_many_connections\"}}";

// Writes the 503 on a cleartext socket and shuts its write side; the caller closes or lingers.
void refuse_connection(int fd, bool cleartext) {
  if (cleartext) {
    std::string response =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: "
        "1\r\nConnection: close\r\nContent-Length: " +
        std::to_string(kOverloadedBody.size()) + "\r\n\r\n";
    response.append(kOverloadedBody);
    // Whatever the client already sent is read first, so that closing does not reset the
    // connection under the answer.
    char discard[4096];
    while (::recv(fd, discard, sizeof(discard), MSG_DONTWAIT) > 0) {
    }
    (void)::send(fd, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(fd, SHUT_WR);
  }
}

// The first owner of an accepted connection: decides its protocol, then hands the socket (and
// the bytes already read) to an Http1ServerConnection or an Http2ServerConnection. Cleartext: the
// HTTP/2 client preface means h2c with prior knowledge, anything else HTTP/1.1 (decided at the
// first byte that differs from the preface). TLS: the ALPN result ("h2" or not), known once the
// handshake is done, i.e. when the first bytes arrive.
class ProtocolSniffer final : public ServerConnection, public Connection::Handler {
 public:
  ProtocolSniffer(ServerConnectionHost& host, std::shared_ptr<const TlsContext> tls, SSL* ssl)
      : host_(host), ssl_(ssl), head_timer_(host.loop(), [this] { shutdown_and_retire(); }) {
    tls_ = std::move(tls);
  }

  // Takes the connection (made with this as its handler). Without HTTP/2 it is HTTP/1.1 at once.
  void attach(std::unique_ptr<Connection> conn) {
    conn_ = std::move(conn);
    if (!host_.options().http2) {
      hand_over(/*http2=*/false, nullptr);
      return;
    }
    conn_->set_read_timeout(host_.options().idle_timeout_ms);
    // The first request's head deadline covers the bytes before the protocol is known too (a
    // client trickling the preface).
    if (host_.options().request_header_timeout_ms > 0) {
      head_timer_.arm(host_.options().request_header_timeout_ms);
    }
  }

  void shutdown() override {
    head_timer_.cancel();
    if (conn_ != nullptr) conn_->close();
  }

  void on_readable(evbuffer* input) override {
    if (ssl_ != nullptr) {
      hand_over(negotiated_alpn(ssl_) == "h2", input);
      return;
    }
    char head[kHttp2Preface.size()];
    const size_t n = std::min(evbuffer_get_length(input), sizeof(head));
    evbuffer_copyout(input, head, n);
    if (std::memcmp(head, kHttp2Preface.data(), n) != 0) {
      hand_over(false, input);
    } else if (n == kHttp2Preface.size()) {
      hand_over(true, input);
    }  // else: a prefix of the preface so far; wait for more
  }
  void on_drained() override {}
  void on_closed(Connection::CloseReason /*reason*/, std::string_view /*message*/) override {
    head_timer_.cancel();
    host_.retire(this);
  }

 private:
  void shutdown_and_retire() {
    shutdown();
    host_.retire(this);
  }

  void hand_over(bool http2, evbuffer* input) {
    head_timer_.cancel();
    std::unique_ptr<ServerConnection> next;
    Connection::Handler* handler = nullptr;
    if (http2) {
      auto c = std::make_unique<Http2ServerConnection>(host_, std::move(conn_), tls_);
      handler = c.get();
      next = std::move(c);
    } else {
      auto c = std::make_unique<Http1ServerConnection>(host_, std::move(conn_), tls_);
      handler = c.get();
      next = std::move(c);
    }
    host_.replace(this, std::move(next));  // this is destroyed later, from the loop
    if (input != nullptr) handler->on_readable(input);
  }

  ServerConnectionHost& host_;
  SSL* ssl_;  // owned by the connection's bufferevent; null for cleartext
  std::unique_ptr<Connection> conn_;
  // The head deadline while the protocol is not known yet; cancelled at the hand-over.
  Timer head_timer_;
};

}  // namespace

// Per-loop state: the listener and the connections it accepted. Touched only on its loop's
// thread once the loop runs.
struct HttpServer::Worker final : public ServerConnectionHost {
  Worker(HttpServer& server, EventLoop& loop) : server(server), event_loop(loop) {
    sweep_event = event_new(loop.base(), -1, 0, &Worker::on_sweep, this);
  }
  ~Worker() override {
    close_all();
    for (auto& [fd, linger] : lingering) {
      event_free(linger.ev);
      ::close(fd);
    }
    event_free(sweep_event);
  }

  EventLoop& loop() override { return event_loop; }
  const ServerOptions& options() const override { return server.options_; }
  void dispatch(std::shared_ptr<ServerStream> stream) override {
    server.handler_(std::move(stream));
  }
  bool draining() const override { return server.draining_.load(std::memory_order_relaxed); }

  void retire(ServerConnection* connection) override {
    auto it = connections.find(connection);
    if (it == connections.end()) return;
    graveyard.push_back(std::move(it->second));
    connections.erase(it);
    server.open_connections_.fetch_sub(1, std::memory_order_relaxed);
    server.options_.budget->close_connection();
    // Destroyed from the loop, outside the connection's own callbacks.
    event_active(sweep_event, EV_TIMEOUT, 0);
  }

  void replace(ServerConnection* old, std::unique_ptr<ServerConnection> next) override {
    auto it = connections.find(old);
    if (it == connections.end()) return;
    graveyard.push_back(std::move(it->second));
    connections.erase(it);
    ServerConnection* raw = next.get();
    connections.emplace(raw, std::move(next));
    event_active(sweep_event, EV_TIMEOUT, 0);
  }

  void accept(int fd) {
    const ServerOptions& o = server.options_;
    const ConnectionOptions co{o.high_water_bytes, o.low_water_bytes, /*direct_read=*/true};
    std::shared_ptr<const TlsContext> tls = server.tls();
    if (!o.budget->try_open_connection()) {
      // Counted before the answer goes out: whoever reads the 503 sees the count.
      if (o.on_refused) o.on_refused("connections");
      refuse_connection(fd, /*cleartext=*/tls == nullptr);
      if (tls == nullptr) {
        linger(fd);
      } else {
        ::close(fd);
      }
      return;
    }
    SSL* ssl = nullptr;
    if (tls != nullptr) {
      ssl = tls->new_ssl(/*allow_h2=*/o.http2);
      if (ssl == nullptr) {
        o.budget->close_connection();
        ::close(fd);
        return;
      }
    }
    auto sniffer = std::make_unique<ProtocolSniffer>(*this, tls, ssl);
    ProtocolSniffer* raw = sniffer.get();
    connections.emplace(raw, std::move(sniffer));
    server.open_connections_.fetch_add(1, std::memory_order_relaxed);
    raw->attach(ssl != nullptr ? std::make_unique<Connection>(event_loop, fd, ssl, *raw, co)
                               : std::make_unique<Connection>(event_loop, fd, *raw, co));
  }

  // Graceful drain: no new connections; HTTP/2 connections announce GOAWAY.
  void drain_all() {
    listener.reset();
    std::vector<ServerConnection*> open;
    open.reserve(connections.size());
    for (auto& [raw, connection] : connections) open.push_back(raw);
    for (ServerConnection* raw : open) {
      if (connections.count(raw) != 0) raw->drain();
    }
  }

  // Stops accepting and closes every connection (open streams get on_close).
  void close_all() {
    listener.reset();
    auto open = std::move(connections);
    connections.clear();
    server.open_connections_.fetch_sub(open.size(), std::memory_order_relaxed);
    for (size_t i = 0; i < open.size(); ++i) server.options_.budget->close_connection();
    for (auto& [raw, connection] : open) connection->shutdown();
    open.clear();
    graveyard.clear();
  }

  static void on_sweep(int /*fd*/, short /*what*/, void* arg) {
    static_cast<Worker*>(arg)->graveyard.clear();
  }

  // A refused connection's socket stays open for a moment after its 503 (write side shut), read
  // and discarded until the client closes, so that request bytes still on their way do not make
  // close() reset the connection under the answer (nginx's lingering close). Bounded: at most
  // kMaxLingering sockets per worker (past that, closed at once as before) for about
  // kLingerMs each (a client still sending when that passes is closed on its next byte or after a
  // second of quiet).
  static constexpr size_t kMaxLingering = 256;
  static constexpr int64_t kLingerMs = 1000;
  struct Lingering {
    event* ev = nullptr;
    std::chrono::steady_clock::time_point until;
  };

  void linger(int fd) {
    if (lingering.size() >= kMaxLingering) {
      ::close(fd);
      return;
    }
    event* ev = event_new(event_loop.base(), fd, EV_READ | EV_PERSIST, &Worker::on_linger, this);
    if (ev == nullptr) {
      ::close(fd);
      return;
    }
    lingering.emplace(
        fd, Lingering{ev, std::chrono::steady_clock::now() + std::chrono::milliseconds(kLingerMs)});
    const timeval quiet{kLingerMs / 1000, (kLingerMs % 1000) * 1000};
    event_add(ev, &quiet);
  }

  static void on_linger(int fd, short what, void* arg) {
    auto* self = static_cast<Worker*>(arg);
    auto it = self->lingering.find(fd);
    if (it == self->lingering.end()) return;
    if ((what & EV_READ) != 0) {
      char discard[4096];
      ssize_t n = 0;
      while ((n = ::recv(fd, discard, sizeof(discard), MSG_DONTWAIT)) > 0) {
      }
      const bool more = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      if (more && std::chrono::steady_clock::now() < it->second.until) return;
    }
    event_free(it->second.ev);
    self->lingering.erase(it);
    ::close(fd);
  }

  HttpServer& server;
  EventLoop& event_loop;
  std::unique_ptr<Listener> listener;
  std::unordered_map<ServerConnection*, std::unique_ptr<ServerConnection>> connections;
  std::vector<std::unique_ptr<ServerConnection>> graveyard;
  event* sweep_event = nullptr;
  std::unordered_map<int, Lingering> lingering;  // refused sockets, by descriptor
};

HttpServer::HttpServer(ServerOptions options, ServerHandler handler)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      own_workers_(std::make_unique<WorkerThreads>(options_.workers)),
      workers_(own_workers_.get()),
      tls_(options_.tls) {
  if (options_.budget == nullptr) {
    options_.budget =
        std::make_shared<ServerBudget>(options_.max_connections, options_.max_request_memory_bytes);
  }
}

HttpServer::HttpServer(ServerOptions options, ServerHandler handler, WorkerThreads& workers)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      workers_(&workers),
      tls_(options_.tls) {
  if (options_.budget == nullptr) {
    options_.budget =
        std::make_shared<ServerBudget>(options_.max_connections, options_.max_request_memory_bytes);
  }
}

uint64_t HttpServer::accept_backoffs() const { return accept_backoffs_.load(); }

size_t HttpServer::unsent_connections_on(EventLoop& loop) const {
  const auto index = static_cast<size_t>(loop.index());
  if (!started_ || stopped_ || index >= per_loop_.size()) return 0;
  size_t n = 0;
  for (const auto& [raw, connection] : per_loop_[index]->connections) {
    n += connection->unsent_bytes() > 0 ? 1 : 0;
  }
  return n;
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  if (started_) return Error{ErrorKind::kInternal, "HttpServer::start called twice"};
  started_ = true;
  for (int i = 0; i < workers_->size(); ++i) {
    per_loop_.push_back(std::make_unique<Worker>(*this, workers_->loop(i)));
  }
  // The first listener picks the port (when 0); the others share it through SO_REUSEPORT.
  // Listeners are added from this thread: libevent's locks make that safe on a running loop.
  uint16_t port = options_.port;
  for (auto& worker : per_loop_) {
    Worker* w = worker.get();
    auto listener = Listener::open(w->event_loop, options_.address, port, options_.backlog,
                                   [w](int fd) { w->accept(fd); });
    if (!listener.ok()) {
      stop();
      return listener.error();
    }
    w->listener = std::move(listener.value());
    w->listener->set_on_backoff([this] {
      accept_backoffs_.fetch_add(1, std::memory_order_relaxed);
      if (options_.on_refused) options_.on_refused("accept_backoff");
    });
    port = w->listener->port();
  }
  port_ = port;
  if (own_workers_) own_workers_->start();
  return Status();
}

void HttpServer::stop_accepting() {
  if (!started_ || stopped_ || !workers_->running()) return;
  draining_.store(true, std::memory_order_relaxed);
  workers_->run_on_all_and_wait(
      [this](EventLoop& loop) { per_loop_[static_cast<size_t>(loop.index())]->drain_all(); });
}

void HttpServer::set_tls(std::shared_ptr<const TlsContext> tls) {
  std::lock_guard<std::mutex> lock(tls_mutex_);
  tls_ = std::move(tls);
}

std::shared_ptr<const TlsContext> HttpServer::tls() const {
  std::lock_guard<std::mutex> lock(tls_mutex_);
  return tls_;
}

void HttpServer::stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  if (workers_->running()) {
    workers_->run_on_all_and_wait(
        [this](EventLoop& loop) { per_loop_[static_cast<size_t>(loop.index())]->close_all(); });
  } else {
    for (auto& worker : per_loop_) worker->close_all();
  }
  if (own_workers_) own_workers_->stop();
  per_loop_.clear();
}

}  // namespace cutline::proto
