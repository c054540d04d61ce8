#pragma once
// Internal to proto/: the pieces behind HttpClient.
//   ClientExchange        one request from start() to its single outcome (or cancel()).
//   Http1ClientConnection one upstream TCP connection: connecting, busy with one exchange, or
//                         idle in the pool.
//   HttpClient::Pool      the per-client registry: idle connections per host:port, every open
//                         connection, exchanges still active, and retired connections waiting
//                         to be destroyed from the loop (never inside their own callbacks).

#include <sys/socket.h>

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http1/http1_parser.h"
#include "cutline/proto/net/connection.h"

struct event;

namespace cutline::proto {

class Http1ClientConnection;

class ClientExchange {
 public:
  enum class State { kActive, kDone };

  ClientExchange(HttpClient::Pool& pool, ClientRequest request, ClientCallbacks callbacks);

  void cancel();
  void pause();
  void resume();
  bool active() const { return state_ == State::kActive; }

  // From the connection (each checks that the exchange is still active).
  void deliver_head(int status, HttpHeaders& headers);
  void deliver_body(std::string_view data);
  void complete(HttpHeaders& trailers);
  void fail(const ClientError& error);
  // The client is being destroyed: end without callbacks.
  void abandon();

  ClientRequest& request() { return request_; }
  const ClientRequest& request() const { return request_; }
  bool paused() const { return paused_; }
  const std::array<PrefetchSpan, 4>& prefetch_hints() const { return callbacks_.prefetch; }

  // Where to connect (resolved in start()).
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string key;       // "host:port", the pool key
  bool retried = false;  // a stale pooled connection was already replaced once
  Http1ClientConnection* connection = nullptr;

 private:
  void finish_state();
  void after_callback();

  // What a body delivery reads first (state, on_body), at the front.
  HttpClient::Pool* pool_;  // null once done
  State state_ = State::kActive;
  bool paused_ = false;
  int in_callback_ = 0;  // on_head/on_body running (they may cancel)
  ClientCallbacks callbacks_;
  ClientRequest request_;
};

class Http1ClientConnection final : public Connection::Handler, public Http1Parser::Sink {
 public:
  Http1ClientConnection(HttpClient::Pool& pool, std::string key);
  ~Http1ClientConnection() override;

  // Starts connecting; false when no socket could be created.
  // With `ssl` (ownership taken) the connection is TLS (see Connection::connect).
  bool connect(const sockaddr* addr, socklen_t addr_len, ssl_st* ssl = nullptr);
  // Takes on `exchange` (this connection is connecting or idle): sends its request now or once
  // connected.
  void assign(std::shared_ptr<ClientExchange> exchange, bool reused);
  // The exchange was cancelled: close without callbacks and retire.
  void abort_exchange();
  // The exchange paused or resumed reading.
  void pause_reading();
  void resume_reading();

  const std::string& key() const { return key_; }
  // Closes the socket (client destruction); no callbacks.
  void close_now() { conn_->close(); }

 private:
  void on_connected() override;
  void on_readable(evbuffer* input) override;
  void on_bytes(Connection& conn, std::string_view data) override;
  void on_drained() override {}
  void on_closed(Connection::CloseReason reason, std::string_view message) override;
  bool on_head(Http1Head& head) override;
  bool on_body(std::string_view data) override;
  bool on_message_complete(HttpHeaders& trailers) override;

  void send_request();
  // parser_.feed(data) with the body pieces of this read (one per HTTP chunk: a token each, on a
  // streaming response) delivered as one on_body call after the parser returns, so that the
  // caller relays a read with one write rather than one per chunk. A single piece is passed
  // through in place; several are joined in a buffer shared by the loop's connections.
  Result<size_t> feed_batched(std::string_view data);
  void flush_body_batch();
  // Ends the current exchange successfully; pools or closes this connection first.
  void complete_exchange(bool reusable);
  void fail_exchange(ClientErrorKind kind, std::string message);
  // Should the callbacks stop (cancelled or paused)?
  bool should_pause() const;
  void retire();

  // Spans conn_ prefetches before each read (this object, the exchange, the parser, the
  // caller's): set in assign(). First, next to the vtable pointer the read loads anyway.
  std::array<PrefetchSpan, 7> prefetch_{};
  HttpClient::Pool& pool_;
  std::string key_;
  std::unique_ptr<Connection> conn_;
  Http1Parser parser_;
  std::shared_ptr<ClientExchange> exchange_;
  HttpHeaders trailers_;
  bool connected_ = false;
  bool reused_ = false;          // the current exchange got this connection from the pool
  bool any_byte_ = false;        // a response byte arrived for the current exchange
  bool head_delivered_ = false;  // the final (non-1xx) head was delivered
  bool interim_ = false;         // parsing a 1xx response
  bool message_done_ = false;
  bool keep_alive_ = true;
  bool retired_ = false;
  bool batching_ = false;         // inside feed_batched()
  bool batch_joined_ = false;     // the batch is in the shared buffer, not batch_first_
  std::string_view batch_first_;  // the batch while it is one piece (points into the read)
};

struct HttpClient::Pool {
  Pool(HttpClient& client, EventLoop& loop, const ClientOptions& options);
  ~Pool();

  // An idle connection to `key`, removed from the idle list; null when there is none.
  Http1ClientConnection* take_idle(const std::string& key);
  // Returns a finished connection to the idle list; false when the list is full.
  bool put_idle(Http1ClientConnection* connection);
  void remove_idle(Http1ClientConnection* connection);
  // A new connection to the exchange's address, connecting; null when no socket.
  Http1ClientConnection* open(const ClientExchange& exchange);
  void retire(Http1ClientConnection* connection);
  static void on_sweep(int fd, short what, void* arg);

  HttpClient& client;
  EventLoop& loop;
  const ClientOptions& options;
  std::unordered_map<std::string, std::vector<Http1ClientConnection*>> idle;
  std::unordered_map<Http1ClientConnection*, std::unique_ptr<Http1ClientConnection>> all;
  std::vector<std::unique_ptr<Http1ClientConnection>> graveyard;
  std::unordered_set<ClientExchange*> active;
  event* sweep_event = nullptr;
};

}  // namespace cutline::proto
