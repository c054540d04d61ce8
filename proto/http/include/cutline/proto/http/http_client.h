#pragma once
// HttpClient: an HTTP/1.1 and HTTP/2 client on one EventLoop with keep-alive connection pools per
// upstream host:port. The gateway keeps one per worker loop (find it from
// ServerStream::loop().index()), the probe and tests one per loop they run. Responses are streamed:
// the head, then body pieces as they arrive (chunked framing removed), then trailers.
//
// Who calls what, and threading: construct, start(), and use handles on the client's loop thread
// only; callbacks run on that thread. start() never calls a callback inline (even an immediate
// failure is reported from the loop).
//
// Callback contract per request: on_head at most once, then on_body zero or more times, then
// exactly one of on_complete / on_error — unless cancel() was called first, after which nothing
// runs. Errors are values (ClientError), never exceptions. Callbacks may call cancel(), pause(),
// resume() or destroy the handle, and may start() new requests.
//
// HTTP/2 (ClientRequest::protocol): a few connections per host:port (and TLS context), each
// multiplexing many requests as streams up to the upstream's SETTINGS_MAX_CONCURRENT_STREAMS;
// another connection opens when they are full. Same callbacks and handle contract as HTTP/1.1.
//
// Connections (HTTP/1.1): a request takes an idle pooled connection to host:port or opens one.
// After a complete response with keep-alive on both sides, the connection returns to the pool (at
// most ClientOptions::max_idle_per_host; idle ones are closed after idle_timeout_ms or when the
// upstream closes them). A cancelled or failed exchange's connection is closed, never pooled, so
// the upstream sees the client go away and frees its resources. If a pooled (reused) connection
// turns out to have been closed by the upstream before any response byte arrived, the request is
// retried once on a new connection (the usual keep-alive race; the upstream never saw it).
//
// Hosts: an IPv4/IPv6 literal or "localhost" (127.0.0.1) connect at once. Other names are
// resolved asynchronously on the client's loop (libevent's evdns; /etc/resolv.conf and
// /etc/hosts, or ClientOptions::dns_nameservers) and cached for dns_cache_ms: a slow or stalled
// nameserver delays only the requests to that name, never the other streams on the loop. A name
// that does not resolve within dns_timeout_ms fails the request with kResolve.

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/proto/http1/http1_parser.h"
#include "cutline/proto/http1/http_message.h"
#include "cutline/proto/net/connection.h"

namespace cutline::proto {

class DnsResolver;
class EventLoop;
class TlsContext;

struct ClientOptions {
  int64_t connect_timeout_ms = 5000;
  size_t max_idle_per_host = 1024;
  int64_t idle_timeout_ms = 30000;  // pooled idle connections are closed after this
  // Limits for response heads; max_body_bytes 0 = unlimited (streams).
  Http1Limits limits{64 * 1024, 100, 0};
  // Back-pressure marks for the request body output (large uploads).
  size_t high_water_bytes = 64 * 1024;
  size_t low_water_bytes = 16 * 1024;
  // Name resolution (see above): nameservers "IP" or "IP:PORT" (empty: /etc/resolv.conf), how
  // long a resolved address is reused, and how long one lookup may take.
  std::vector<std::string> dns_nameservers;
  int64_t dns_cache_ms = 10000;
  int64_t dns_timeout_ms = 5000;
};

// Which HTTP version a request is sent with.
enum class ClientProtocol {
  kHttp1,  // HTTP/1.1 (over TLS: ALPN as the context offers it, "http/1.1" by default)
  kHttp2,  // HTTP/2: with prior knowledge on cleartext (h2c), ALPN "h2" over TLS (a server that
           // does not select h2 fails the request with kConnectFailed)
  kAuto,   // over TLS: ALPN offers "h2" and "http/1.1" and the server's pick is used (remembered
           // per host, port and context); cleartext: HTTP/1.1
};

struct ClientRequest {
  std::string method = "GET";
  std::string host;  // IP literal or name
  uint16_t port = 80;
  std::string target = "/";  // path and query
  // Sent as given, minus framing headers (Content-Length, Transfer-Encoding, Connection), which
  // the client writes. A Host header is added when absent.
  HttpHeaders headers;
  // Sent with Content-Length (also when empty for POST, PUT and PATCH).
  std::string body;
  // HTTPS: a client TlsContext (tls_context.h: CA store or file, client certificate). SNI and the
  // verified name are `tls_server_name`, or `host` when that is empty. Connections are pooled per
  // host, port and context. Null: cleartext.
  std::shared_ptr<const TlsContext> tls;
  std::string tls_server_name;
  // HTTP/1.1 by default; see ClientProtocol and http2_client_connection.h for HTTP/2 pooling.
  ClientProtocol protocol = ClientProtocol::kHttp1;
};

enum class ClientErrorKind {
  kResolve,           // the host name did not resolve
  kConnectRefused,    // ECONNREFUSED
  kConnectTimeout,    // no connection within connect_timeout_ms
  kConnectFailed,     // another connect error (unreachable, ...)
  kClosedBeforeHead,  // connected and sent, but closed or reset before a complete response head
  kClosedMidBody,     // the head arrived, then the connection closed or reset before the end of
                      // the body: the stop cause upstream_disconnect
  kParse,             // malformed response (or over the head limits)
};

// Stable snake_case label (metrics, logs): "resolve", "connect_refused", ...
std::string_view to_string(ClientErrorKind kind);

struct ClientError {
  ClientErrorKind kind = ClientErrorKind::kConnectFailed;
  std::string message;  // human-readable, includes host:port and the system error

  // kTimeout for kConnectTimeout, kUpstream for everything else.
  Error to_error() const;
};

struct ClientCallbacks {
  // Status and headers of the final response (1xx interim responses are skipped). May move the
  // headers out.
  std::function<void(int status, HttpHeaders& headers)> on_head;
  // A piece of the body (never empty).
  std::function<void(std::string_view data)> on_body;
  // The body ended; trailers of a chunked body (empty otherwise). May move them out.
  std::function<void(HttpHeaders& trailers)> on_complete;
  std::function<void(const ClientError& error)> on_error;
  // Addresses on_body reads first (the caller's own state; null entries are skipped). A cleartext
  // HTTP/1.1 connection asks the CPU to fetch them, and its own, while it waits in recv() for the
  // body bytes: with thousands of streams each of these is a cache miss per token otherwise.
  std::array<PrefetchSpan, 4> prefetch{};
};

class ClientExchange;  // one in-flight request (implementation detail)
class Http2Exchange;   // the same on an HTTP/2 stream

// The caller's handle on one request. Move-only. Destroying an active handle cancels the request.
class ClientHandle {
 public:
  ClientHandle() = default;
  explicit ClientHandle(std::shared_ptr<ClientExchange> exchange);
  explicit ClientHandle(std::shared_ptr<Http2Exchange> exchange);
  ~ClientHandle();
  ClientHandle(ClientHandle&& other) noexcept = default;
  ClientHandle& operator=(ClientHandle&& other) noexcept;
  ClientHandle(const ClientHandle&) = delete;
  ClientHandle& operator=(const ClientHandle&) = delete;

  // Stops the request now: closes its connection (never pooled; HTTP/2: resets its stream only,
  // RST_STREAM CANCEL); no callback runs afterwards. No effect when the request already
  // completed, failed or was cancelled.
  void cancel();
  // Stops reading the response (the upstream's sends back up into its socket buffers; HTTP/2:
  // into this stream's flow-control window, other streams keep flowing): no
  // on_body/on_complete/on_error runs until resume(). Used when the downstream is slow.
  void pause();
  void resume();
  // Started and not yet completed, failed or cancelled.
  bool active() const;

 private:
  std::shared_ptr<ClientExchange> exchange_;
  std::shared_ptr<Http2Exchange> h2_exchange_;
};

class HttpClient {
 public:
  explicit HttpClient(EventLoop& loop, ClientOptions options = {});
  // Loop thread. Closes every connection; active requests end silently (no callbacks), their
  // handles become inactive.
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  ClientHandle start(ClientRequest request, ClientCallbacks callbacks);

  EventLoop& loop() const { return loop_; }
  // Pooled idle connections across all hosts (tests, metrics).
  size_t idle_connections() const;
  // Connections opened since construction (tests: keep-alive reuse means this stays low).
  uint64_t connections_opened() const { return connections_opened_; }

  struct Pool;       // implementation detail (HTTP/1.1)
  struct Http2Pool;  // implementation detail (HTTP/2, http2_client_connection.h)

 private:
  friend class ClientExchange;
  // Fills `addr` for the request's host and port, then runs `place` (at once for an address or a
  // cached name, else once resolved; a failed lookup fails the exchange instead).
  template <typename Exchange>
  void resolve_then(const ClientRequest& req, sockaddr_storage& addr, socklen_t& addr_len,
                    const std::shared_ptr<Exchange>& exchange, std::function<void()> place);

  EventLoop& loop_;
  ClientOptions options_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<Http2Pool> h2_pool_;
  std::unique_ptr<DnsResolver> dns_;  // made at the first host name that is not a literal
  uint64_t connections_opened_ = 0;
};

}  // namespace cutline::proto
