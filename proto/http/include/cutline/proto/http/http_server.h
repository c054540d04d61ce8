#pragma once
// HttpServer: the HTTP/1.1 and HTTP/2 server core shared by the gateway (client side and admin
// listener), the backend's OpenAI server and the test fakes. One SO_REUSEPORT listener per worker
// loop; each accepted connection stays on the loop that accepted it.
//
// Protocols (ServerOptions::http2, on by default): on a cleartext port, a connection that starts
// with the HTTP/2 client preface ("PRI * HTTP/2.0...") speaks HTTP/2 with prior knowledge (h2c),
// anything else HTTP/1.1, both on the same port. Over TLS, ALPN decides: "h2" is HTTP/2, anything
// else (or no ALPN) HTTP/1.1. HTTP/2 streams reach the handler as the same ServerStream
// (protocol() "h2"; see http2_server_stream.h in proto/src for the per-stream flow control).
// Upgrade: h2c is not supported (such a request is served as HTTP/1.1).
//
// HTTP/1.1: requests are parsed with
// Http1Parser under ServerOptions::limits: a violation is answered by the server itself (431,
// 413, 400 with an OpenAI-style JSON error, then the connection closes) and never reaches the
// handler. Keep-alive and pipelining follow HTTP/1.1: the next request on a connection is parsed
// only after the previous response finished. `Expect: 100-continue` is answered with
// `100 Continue` unless ServerOptions::on_expect_continue says no (then the request is answered
// without its body being read).
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
#include <mutex>
#include <string>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/proto/http/server_budget.h"
#include "cutline/proto/http/server_stream.h"
#include "cutline/proto/http1/http1_parser.h"
#include "cutline/proto/net/worker_threads.h"

namespace cutline::proto {

class EventLoop;
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
  // (keep-alive idle). 0 = never.
  int64_t idle_timeout_ms = 60000;
  // Request deadlines, whatever the bytes trickling in (a byte a second does not extend them):
  // the head must be complete within request_header_timeout_ms of its first byte (of the
  // accept, for a connection's first request; of HEADERS, for an HTTP/2 stream), the body within
  // request_body_timeout_ms of the end of the head. Past either: 408 with a JSON error (HTTP/1.1:
  // then close; HTTP/2: on that stream; an HTTP/2 header block still open: GOAWAY and close).
  // 0 = none.
  int64_t request_header_timeout_ms = 10000;
  int64_t request_body_timeout_ms = 30000;
  // Process-wide caps (server_budget.h): open connections and request bytes in memory. Null: this
  // server makes its own from max_connections and max_request_memory_bytes (0 = unlimited).
  std::shared_ptr<ServerBudget> budget;
  size_t max_connections = 0;
  size_t max_request_memory_bytes = 0;
  int backlog = 4096;
  // TLS: when set, every accepted connection does a TLS handshake with this server context
  // (tls_context.h) before HTTP. Null: cleartext. HttpServer::set_tls() replaces it later.
  std::shared_ptr<const TlsContext> tls;
  // HTTP/2 (h2c with prior knowledge on cleartext, ALPN "h2" over TLS). False: HTTP/1.1 only.
  bool http2 = true;
  // SETTINGS_MAX_CONCURRENT_STREAMS announced on each HTTP/2 connection.
  uint32_t http2_max_concurrent_streams = 256;
  // SETTINGS_INITIAL_WINDOW_SIZE: how much of a request body a client may send on one stream
  // before we read it (the connection window is 16 times this, capped at 2^31-1).
  uint32_t http2_initial_window_bytes = 1024 * 1024;
  // Per HTTP/2 connection: streams whose request has not fully arrived (HEADERS seen, END_STREAM
  // not yet), and the request body bytes they hold. A stream past either cap is answered 503.
  uint32_t http2_max_unfinished_streams = 100;
  size_t http2_max_buffered_request_bytes = 16 * 1024 * 1024;
  // RST_STREAM frames a client may send per second on one connection (a burst of twice that is
  // allowed). Past it: GOAWAY(ENHANCE_YOUR_CALM) and close ("rapid reset"). 0 = unlimited.
  uint32_t http2_max_resets_per_s = 100;
  // Called on the loop thread when the server refuses work on its own: "connections" (the
  // connection cap: 503 and close), "http2_resets" (GOAWAY for rapid reset), "accept_backoff"
  // (accept failed for lack of descriptors; the listener pauses). For a metric; must not block.
  std::function<void(std::string_view reason)> on_refused;
  // Called on the loop thread when the server answers a request itself instead of dispatching
  // it (a parse error or a broken limit: 400, 413, 431). `request` holds what was parsed before
  // the error (empty when the head was not complete). The hook may add headers to the answer and
  // replace its JSON body (the gateway adds its stop record), and count or log it; it must not
  // block. Null: the default answer only. (Added for the gateway's one-stop-record rule.)
  std::function<void(const HttpRequest& request, const Error& error, HttpHeaders& headers,
                     std::string& body)>
      on_protocol_error;
  // Called on the loop thread for an HTTP/1.1 request head with `Expect: 100-continue`, before
  // anything is answered. true: `100 Continue` goes out and the client sends its body. false: no
  // 100; the request reaches the handler at once with an empty body and the connection closes
  // after the answer, so a client the handler will refuse (no API key) uploads nothing. Null:
  // always true. Must not block. (The gateway answers false to a request it cannot authenticate.)
  std::function<bool(const HttpRequest& head)> on_expect_continue;
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
  // open, so that their streams can finish (graceful drain); stop() still closes those. HTTP/2
  // connections get a GOAWAY naming the last stream processed (the client opens no new stream
  // there) and close once their streams are done. Call from the controlling thread while the
  // workers run. Idempotent.
  void stop_accepting();

  // Replaces the TLS context for connections accepted from now on (certificate reload); open
  // connections keep the one they started with. Thread-safe (any thread, e.g. the one reloading
  // the policy). On a server started without TLS it turns TLS on for new connections; null turns
  // it off.
  void set_tls(std::shared_ptr<const TlsContext> tls);
  // The context new connections use (null: cleartext). Thread-safe.
  std::shared_ptr<const TlsContext> tls() const;

  // The bound port (valid after a successful start()).
  uint16_t port() const { return port_; }
  WorkerThreads& workers() { return *workers_; }
  // Open client connections across all workers (for tests and metrics).
  size_t open_connections() const { return open_connections_.load(std::memory_order_relaxed); }
  // The process-wide caps this server counts against (ServerOptions::budget or its own).
  ServerBudget& budget() { return *options_.budget; }
  // On a worker loop's thread: how many of this server's connections on that loop still have
  // response bytes to send (graceful drain waits for them before stop() closes the rest).
  size_t unsent_connections_on(EventLoop& loop) const;
  // Times a listener paused accepting because accept() ran out of descriptors.
  uint64_t accept_backoffs() const;

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
  std::atomic<bool> draining_{false};
  std::atomic<size_t> open_connections_{0};
  std::atomic<uint64_t> accept_backoffs_{0};
  mutable std::mutex tls_mutex_;
  std::shared_ptr<const TlsContext> tls_;  // guarded by tls_mutex_ (options_.tls at start)
};

}  // namespace cutline::proto
