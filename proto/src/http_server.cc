#include "cutline/proto/http_server.h"

#include <event2/event.h>

#include <unordered_map>

#include "cutline/proto/listener.h"
#include "http1_server_connection.h"

namespace cutline::proto {

// Per-loop state: the listener and the connections it accepted. Touched only on its loop's
// thread once the loop runs.
struct HttpServer::Worker final : public ServerConnectionHost {
  Worker(HttpServer& server, EventLoop& loop) : server(server), event_loop(loop) {
    sweep_event = event_new(loop.base(), -1, 0, &Worker::on_sweep, this);
  }
  ~Worker() override {
    close_all();
    event_free(sweep_event);
  }

  EventLoop& loop() override { return event_loop; }
  const ServerOptions& options() const override { return server.options_; }
  void dispatch(std::shared_ptr<ServerStream> stream) override {
    server.handler_(std::move(stream));
  }

  void retire(Http1ServerConnection* connection) override {
    auto it = connections.find(connection);
    if (it == connections.end()) return;
    graveyard.push_back(std::move(it->second));
    connections.erase(it);
    server.open_connections_.fetch_sub(1, std::memory_order_relaxed);
    // Destroyed from the loop, outside the connection's own callbacks.
    event_active(sweep_event, EV_TIMEOUT, 0);
  }

  void accept(int fd) {
    auto connection = std::make_unique<Http1ServerConnection>(*this, fd);
    Http1ServerConnection* raw = connection.get();
    connections.emplace(raw, std::move(connection));
    server.open_connections_.fetch_add(1, std::memory_order_relaxed);
  }

  // Stops accepting and closes every connection (open streams get on_close).
  void close_all() {
    listener.reset();
    auto open = std::move(connections);
    connections.clear();
    server.open_connections_.fetch_sub(open.size(), std::memory_order_relaxed);
    for (auto& [raw, connection] : open) connection->shutdown();
    open.clear();
    graveyard.clear();
  }

  static void on_sweep(int /*fd*/, short /*what*/, void* arg) {
    static_cast<Worker*>(arg)->graveyard.clear();
  }

  HttpServer& server;
  EventLoop& event_loop;
  std::unique_ptr<Listener> listener;
  std::unordered_map<Http1ServerConnection*, std::unique_ptr<Http1ServerConnection>> connections;
  std::vector<std::unique_ptr<Http1ServerConnection>> graveyard;
  event* sweep_event = nullptr;
};

HttpServer::HttpServer(ServerOptions options, ServerHandler handler)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      own_workers_(std::make_unique<WorkerThreads>(options_.workers)),
      workers_(own_workers_.get()) {}

HttpServer::HttpServer(ServerOptions options, ServerHandler handler, WorkerThreads& workers)
    : options_(std::move(options)), handler_(std::move(handler)), workers_(&workers) {}

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
    port = w->listener->port();
  }
  port_ = port;
  if (own_workers_) own_workers_->start();
  return Status();
}

void HttpServer::stop_accepting() {
  if (!started_ || stopped_ || !workers_->running()) return;
  workers_->run_on_all_and_wait(
      [this](EventLoop& loop) { per_loop_[static_cast<size_t>(loop.index())]->listener.reset(); });
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
