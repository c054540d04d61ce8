#pragma once
// Internal to proto/: what HttpServer's per-loop state (the host) and the protocol connections
// it owns (HTTP/1.1, HTTP/2, and the sniffer that picks between them) know about each other.
//
// A ServerConnection is one accepted TCP (or TLS) connection. The host keeps it until it
// retire()s itself; the host destroys it later from the loop, never inside its own callbacks.
// A connection that hands its socket to another protocol (the sniffer, once it has seen the
// first bytes or the ALPN result) replace()s itself with the new one.

#include <memory>

#include "cutline/proto/http/http_server.h"
#include "cutline/proto/http/server_stream.h"

namespace cutline::proto {

class EventLoop;
class TlsContext;

class ServerConnection {
 public:
  virtual ~ServerConnection() = default;
  // Server stop: closes the socket now; open streams get their on_close.
  virtual void shutdown() = 0;
  // Graceful drain (HttpServer::stop_accepting): HTTP/2 sends GOAWAY so the client opens no new
  // stream here; streams already open finish. HTTP/1.1 has nothing to announce.
  virtual void drain() {}
  // Response bytes accepted from the handler and not yet taken by the kernel (graceful drain
  // waits for them: a finished stream's last chunk may still be queued for a slow client).
  virtual size_t unsent_bytes() const { return 0; }

 protected:
  // Keeps a TLS context alive as long as the connection made from it (its ALPN callback refers
  // to it, and set_tls() may replace the server's context meanwhile).
  std::shared_ptr<const TlsContext> tls_;
};

class ServerConnectionHost {
 public:
  virtual ~ServerConnectionHost() = default;
  virtual EventLoop& loop() = 0;
  virtual const ServerOptions& options() const = 0;
  virtual void dispatch(std::shared_ptr<ServerStream> stream) = 0;
  // The connection has ended; destroy it soon (not now: we may be inside its callbacks).
  virtual void retire(ServerConnection* connection) = 0;
  // `old` hands over to `next` (same socket): `old` is destroyed soon, like retire().
  virtual void replace(ServerConnection* old, std::unique_ptr<ServerConnection> next) = 0;
  // True once stop_accepting() ran: a new HTTP/2 connection starts with GOAWAY.
  virtual bool draining() const = 0;
};

}  // namespace cutline::proto
