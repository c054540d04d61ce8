#pragma once
// RedisConnection: one connection to Redis on an EventLoop, over plain TCP or TLS, speaking
// RESP. Commands are encoded by hiredis' formatter and replies parsed by its reader; the
// transport is Cutline's own proto::Connection (libevent, OpenSSL), so TLS works with Debian's
// hiredis 0.14, whose own connections have no TLS.
//
// Replies come back in the order the commands went out (Redis answers a connection's commands in
// order), each to its command's callback. When the connection ends before a reply arrived, the
// callbacks still waiting run with a null reply, then Events::closed says why.
//
// Threading: everything on the loop's thread. Lifetime: a callback may destroy the connection;
// no callback runs after destruction (callbacks still waiting are dropped without running).

#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/proto/net/connection.h"

struct redisReader;
struct redisReply;
struct ssl_st;

namespace cutline::proto {
class EventLoop;
}

namespace cutline::gateway {

class RedisConnection final : public proto::Connection::Handler {
 public:
  // The reply (valid during the call), or nullptr: the connection ended first.
  using ReplyFn = std::function<void(const redisReply* reply)>;
  struct Events {
    std::function<void()> connected;  // connected (and, over TLS, the certificate verified)
    // The connection ended without close() or destruction by its owner: refused, timed out, a
    // failed TLS handshake, the peer closing, a protocol error. Runs once.
    std::function<void(const std::string& why)> closed;
  };

  RedisConnection(proto::EventLoop& loop, Events events);
  ~RedisConnection() override;
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Starts connecting to `address` (an IPv4 or IPv6 literal) and `port`; with `ssl` (from
  // proto::TlsContext::new_client_ssl(), ownership taken) over TLS. The outcome arrives later,
  // as Events::connected or Events::closed. False (with `error`) when it cannot even start.
  bool connect(const std::string& address, uint16_t port, int64_t timeout_ms, ssl_st* ssl,
               std::string& error);
  // Sends one command (pipelined: it may go out before the replies to earlier ones came back).
  // Commands sent before the connection is up wait in its output and leave once it is.
  void command(const std::vector<std::string_view>& args, ReplyFn done);
  // Closes once every reply still expected has arrived (Events::closed then runs with "").
  void close_when_answered();

 private:
  void on_connected() override;
  void on_readable(evbuffer* input) override;
  void on_drained() override {}
  void on_closed(proto::Connection::CloseReason reason, std::string_view message) override;
  // Ends the connection: every waiting callback with a null reply, then Events::closed(why).
  void end(const std::string& why);

  proto::EventLoop& loop_;
  Events events_;
  std::unique_ptr<proto::Connection> conn_;
  redisReader* reader_ = nullptr;
  std::deque<ReplyFn> replies_;
  bool closing_ = false;         // close_when_answered()
  bool ended_ = false;           // end() ran: Events::closed has run or is running
  std::shared_ptr<bool> alive_;  // false once destroyed (a callback may destroy us)
};

}  // namespace cutline::gateway
