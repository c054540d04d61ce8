#pragma once
// HttpServer: the HTTP/1.1 server core shared by the gateway (client side and admin listener),
// the backend's OpenAI server and the test fakes. One SO_REUSEPORT listener per worker loop;
// each accepted connection stays on the loop that accepted it. Requests are parsed with
// Http1Parser under ServerOptions::limits: a violation is answered by the server itself (431,
// 413, 400 with an OpenAI-style JSON error, then the connection closes) and never reaches the
// handler. Keep-alive and pipelining follow HTTP/1.1: the next request on a connection is parsed
// only after the previous response finished. `Expect: 100-continue` is answered.
//
// Who calls what: the owner constructs, start()s and stop()s from a controlling thread (not a
// worker). The ServerHandler runs on a worker loop thread for each complete request, with a
// ServerStream (see server_stream.h for the threading, lifetime, back-pressure and
// cancellation rules).
//
// Memory per open connection: the bufferevent and its (on-demand) evbuffers, the llhttp state and
// the current request; nothing preallocated per connection beyond that.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cutline/proto/http1_parser.h"
#include "cutline/proto/result.h"
#include "cutline/proto/server_stream.h"
#include "cutline/proto/worker_threads.h"

namespace cutline::proto {

class TlsContext;

struct ServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port, see HttpServer::port()
  // Worker threads when the server makes its own WorkerThreads (ignored with shared workers).
  int workers = 1;
  Http1Limits limits;
  // Back-pressure marks on each connection's output (see ServerStream::send_body).
  size_t high_water_bytes = 64 * 1024;
  size_t low_water_bytes = 16 * 1024;
  // A connection with no request in progress that receives nothing for this long is closed
  // (keep-alive idle and slow request heads). 0 = never.
  int64_t idle_timeout_ms = 60000;
  int backlog = 4096;
  // TLS: when set, every accepted connection does a TLS handshake with this server context
  // (tls_context.h) before HTTP. The context must outlive the server. Null: cleartext.
  std::shared_ptr<const TlsContext> tls;
  // Called on the loop thread when the server answers a request itself instead of dispatching
  // it (a parse error or a broken limit: 400, 413, 431). `request` holds what was parsed before
  // the error (empty when the head was not complete). The hook may add headers to the answer and
  // replace its JSON body (the gateway adds its stop record), and count or log it; it must not
  // block. Null: the default answer only. (Added for the gateway's one-stop-record rule.)
  std::function<void(const HttpRequest& request, const Error& error, HttpHeaders& headers,
                     std::string& body)>
      on_protocol_error;
};

// Called on a worker loop thread once per request.
using ServerHandler = std::function<void(std::shared_ptr<ServerStream> stream)>;

class HttpServer {
 public:
  // The server creates and runs its own WorkerThreads(options.workers).
  HttpServer(ServerOptions options, ServerHandler handler);
  // The server runs on `workers` (shared with other servers and clients); the caller starts and
  // stops them, and must stop() this server before stopping the workers.
  HttpServer(ServerOptions options, ServerHandler handler, WorkerThreads& workers);
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds one listener per worker loop (port 0 picks a free port, shared by all of them) and
  // starts serving. Errors: kIo (bind failed, address in use). Call once.
  Status start();
  // Closes the listeners and every connection (open streams get their on_close callback), then
  // stops the server's own workers. Waits until that is done. Idempotent.
  void stop();

  // Closes the listeners (new connections are refused) and keeps serving the connections already
  // open, so that their streams can finish (graceful drain); stop() still closes those. Call
  // from the controlling thread while the workers run. Idempotent.
  void stop_accepting();

  // The bound port (valid after a successful start()).
  uint16_t port() const { return port_; }
  WorkerThreads& workers() { return *workers_; }
  // Open client connections across all workers (for tests and metrics).
  size_t open_connections() const { return open_connections_.load(std::memory_order_relaxed); }

  struct Worker;  // per-loop state (implementation detail)

 private:
  ServerOptions options_;
  ServerHandler handler_;
  std::unique_ptr<WorkerThreads> own_workers_;
  WorkerThreads* workers_;
  std::vector<std::unique_ptr<Worker>> per_loop_;
  uint16_t port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
  std::atomic<size_t> open_connections_{0};
};

}  // namespace cutline::proto
