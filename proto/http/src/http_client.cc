#include "cutline/proto/http/http_client.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cstdio>
#include <cstring>

#include "cutline/proto/net/dns_resolver.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/tls/tls_context.h"
#include "http1_client_connection.h"
#include "http2_client_connection.h"

namespace cutline::proto {

std::string_view to_string(ClientErrorKind kind) {
  switch (kind) {
    case ClientErrorKind::kResolve:
      return "resolve";
    case ClientErrorKind::kConnectRefused:
      return "connect_refused";
    case ClientErrorKind::kConnectTimeout:
      return "connect_timeout";
    case ClientErrorKind::kConnectFailed:
      return "connect_failed";
    case ClientErrorKind::kClosedBeforeHead:
      return "closed_before_head";
    case ClientErrorKind::kClosedMidBody:
      return "closed_mid_body";
    case ClientErrorKind::kParse:
      return "parse";
  }
  return "connect_failed";
}

Error ClientError::to_error() const {
  const ErrorKind error_kind =
      kind == ClientErrorKind::kConnectTimeout ? ErrorKind::kTimeout : ErrorKind::kUpstream;
  return Error{error_kind, std::string(to_string(kind)) + ": " + message};
}

namespace {

// The request's host without IPv6 brackets ("localhost" as 127.0.0.1).
std::string bare_host(const ClientRequest& req) {
  std::string host = req.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") host = "127.0.0.1";
  return host;
}

// Fills `addr` from a literal IPv4/IPv6 host and the port; false when `host` is a name.
bool literal_address(const std::string& host, uint16_t port, sockaddr_storage& addr,
                     socklen_t& addr_len) {
  auto* in4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, host.c_str(), &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(port);
    addr_len = sizeof(sockaddr_in);
    return true;
  }
  if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    addr_len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

void set_resolved(const DnsResolver::Address& resolved, uint16_t port, sockaddr_storage& addr,
                  socklen_t& addr_len) {
  std::memcpy(&addr, &resolved.addr, resolved.len);
  addr_len = resolved.len;
  if (addr.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&addr)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = htons(port);
  }
}

// An HTTP/1.1 exchange whose address is known: an idle pooled connection or a new one.
void place_http1(HttpClient::Pool& pool, EventLoop& loop,
                 const std::shared_ptr<ClientExchange>& exchange) {
  if (Http1ClientConnection* idle = pool.take_idle(exchange->key)) {
    idle->assign(exchange, /*reused=*/true);
    return;
  }
  Http1ClientConnection* fresh = pool.open(*exchange);
  if (fresh == nullptr) {
    loop.post([exchange, text = "cannot create a socket for " + exchange->key] {
      exchange->fail(ClientError{ClientErrorKind::kConnectFailed, text});
    });
    return;
  }
  fresh->assign(exchange, /*reused=*/false);
}

// The pool key: host:port, and for TLS the context and verified name (a pooled connection was
// verified for exactly these).
std::string pool_key(const ClientRequest& req) {
  std::string key = req.host + ":" + std::to_string(req.port);
  if (req.tls) {
    char id[32];
    std::snprintf(id, sizeof(id), "%p", static_cast<const void*>(req.tls.get()));
    key = "tls/" + std::string(id) + "/" + req.tls_server_name + "/" + key;
  }
  return key;
}

}  // namespace

// ---- Pool ---------------------------------------------------------------------------------------

HttpClient::Pool::Pool(HttpClient& client, EventLoop& loop, const ClientOptions& options)
    : client(client), loop(loop), options(options) {
  sweep_event = event_new(loop.base(), -1, 0, &Pool::on_sweep, this);
}

HttpClient::Pool::~Pool() {
  // Active exchanges end silently; their handles become inactive.
  auto exchanges = active;
  for (ClientExchange* exchange : exchanges) exchange->abandon();
  for (auto& [raw, connection] : all) connection->close_now();
  all.clear();
  graveyard.clear();
  event_free(sweep_event);
}

Http1ClientConnection* HttpClient::Pool::take_idle(const std::string& key) {
  auto it = idle.find(key);
  if (it == idle.end() || it->second.empty()) return nullptr;
  Http1ClientConnection* connection = it->second.back();  // most recently used: warmest
  it->second.pop_back();
  return connection;
}

bool HttpClient::Pool::put_idle(Http1ClientConnection* connection) {
  auto& list = idle[connection->key()];
  if (list.size() >= options.max_idle_per_host) return false;
  list.push_back(connection);
  return true;
}

void HttpClient::Pool::remove_idle(Http1ClientConnection* connection) {
  auto it = idle.find(connection->key());
  if (it == idle.end()) return;
  auto& list = it->second;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] == connection) {
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
}

Http1ClientConnection* HttpClient::Pool::open(const ClientExchange& exchange) {
  auto connection = std::make_unique<Http1ClientConnection>(*this, exchange.key);
  ssl_st* ssl = nullptr;
  if (const auto& tls = exchange.request().tls) {
    const ClientRequest& req = exchange.request();
    ssl = tls->new_client_ssl(req.tls_server_name.empty() ? req.host : req.tls_server_name);
    if (ssl == nullptr) return nullptr;
  }
  if (!connection->connect(reinterpret_cast<const sockaddr*>(&exchange.addr), exchange.addr_len,
                           ssl)) {
    return nullptr;
  }
  ++client.connections_opened_;
  Http1ClientConnection* raw = connection.get();
  all.emplace(raw, std::move(connection));
  return raw;
}

void HttpClient::Pool::retire(Http1ClientConnection* connection) {
  auto it = all.find(connection);
  if (it == all.end()) return;
  graveyard.push_back(std::move(it->second));
  all.erase(it);
  event_active(sweep_event, EV_TIMEOUT, 0);
}

void HttpClient::Pool::on_sweep(int /*fd*/, short /*what*/, void* arg) {
  static_cast<Pool*>(arg)->graveyard.clear();
}

// ---- HttpClient ---------------------------------------------------------------------------------

HttpClient::HttpClient(EventLoop& loop, ClientOptions options)
    : loop_(loop),
      options_(std::move(options)),
      pool_(std::make_unique<Pool>(*this, loop, options_)),
      h2_pool_(std::make_unique<Http2Pool>(*this, loop, options_)) {}

HttpClient::~HttpClient() = default;

size_t HttpClient::idle_connections() const {
  size_t n = 0;
  for (const auto& [key, list] : pool_->idle) n += list.size();
  return n;
}

ClientHandle HttpClient::start(ClientRequest request, ClientCallbacks callbacks) {
  std::string key = pool_key(request);
  // HTTP/2: asked for, or offered by ALPN over TLS unless this upstream is known to pick
  // HTTP/1.1 (then kAuto continues below as HTTP/1.1).
  const ClientProtocol protocol = request.protocol;
  if (protocol == ClientProtocol::kHttp2 ||
      (protocol == ClientProtocol::kAuto && request.tls && !h2_pool_->known_http1(key))) {
    auto exchange =
        std::make_shared<Http2Exchange>(*h2_pool_, std::move(request), std::move(callbacks));
    exchange->key = std::move(key);
    ClientHandle handle(exchange);
    resolve_then(exchange->request(), exchange->addr, exchange->addr_len, exchange,
                 [this, exchange] { h2_pool_->place(exchange); });
    return handle;
  }
  auto exchange =
      std::make_shared<ClientExchange>(*pool_, std::move(request), std::move(callbacks));
  exchange->key = std::move(key);
  resolve_then(exchange->request(), exchange->addr, exchange->addr_len, exchange,
               [this, exchange] { place_http1(*pool_, loop_, exchange); });
  return ClientHandle(exchange);
}

template <typename Exchange>
void HttpClient::resolve_then(const ClientRequest& req, sockaddr_storage& addr, socklen_t& addr_len,
                              const std::shared_ptr<Exchange>& exchange,
                              std::function<void()> place) {
  const std::string host = bare_host(req);
  if (literal_address(host, req.port, addr, addr_len)) return place();
  if (dns_ == nullptr) {
    dns_ = std::make_unique<DnsResolver>(loop_, options_.dns_nameservers, options_.dns_cache_ms,
                                         options_.dns_timeout_ms);
  }
  if (const DnsResolver::Address* cached = dns_->cached(host)) {
    set_resolved(*cached, req.port, addr, addr_len);
    return place();
  }
  // The exchange waits for the name; the loop runs on. A cancel meanwhile ends it (inactive).
  const uint16_t port = req.port;
  dns_->resolve(host, [exchange, port, &addr, &addr_len, place = std::move(place)](
                          bool ok, const DnsResolver::Address& resolved, const std::string& error) {
    if (!exchange->active()) return;
    if (!ok) {
      exchange->fail(ClientError{ClientErrorKind::kResolve, error});
      return;
    }
    set_resolved(resolved, port, addr, addr_len);
    place();
  });
}

// ---- ClientHandle -------------------------------------------------------------------------------

ClientHandle::ClientHandle(std::shared_ptr<ClientExchange> exchange)
    : exchange_(std::move(exchange)) {}

ClientHandle::ClientHandle(std::shared_ptr<Http2Exchange> exchange)
    : h2_exchange_(std::move(exchange)) {}

ClientHandle::~ClientHandle() { cancel(); }

ClientHandle& ClientHandle::operator=(ClientHandle&& other) noexcept {
  if (this != &other) {
    cancel();
    exchange_ = std::move(other.exchange_);
    h2_exchange_ = std::move(other.h2_exchange_);
  }
  return *this;
}

void ClientHandle::cancel() {
  if (exchange_) exchange_->cancel();
  if (h2_exchange_) h2_exchange_->cancel();
}

void ClientHandle::pause() {
  if (exchange_) exchange_->pause();
  if (h2_exchange_) h2_exchange_->pause();
}

void ClientHandle::resume() {
  if (exchange_) exchange_->resume();
  if (h2_exchange_) h2_exchange_->resume();
}

bool ClientHandle::active() const {
  return (exchange_ && exchange_->active()) || (h2_exchange_ && h2_exchange_->active());
}

}  // namespace cutline::proto
