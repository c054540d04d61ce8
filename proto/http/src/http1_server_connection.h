#pragma once
// Internal to proto/: the HTTP/1.1 server side of one TCP connection (Http1ServerConnection) and
// the ServerStream it hands to the handler for each request (Http1ServerStream). HttpServer owns
// the connections through a ServerConnectionHost, one per worker loop (server_connection.h).
//
// Lifecycle of a connection: read and parse a request (paused at its end, so pipelined bytes wait
// in the input buffer) → hand a stream to the handler → the stream's finish() either resumes
// parsing (keep-alive) or closes after flushing → ... A connection that ends (peer, error,
// timeout, reset, server stop) tells its open stream (on_close) and is retired: the host destroys
// it from the loop later, never inside one of its own callbacks.
//
// Request deadlines (ServerOptions::request_header_timeout_ms, request_body_timeout_ms): one
// timer, armed for the head from the accept (first request) or from the first byte of a later
// one, re-armed for the body when the head is complete, cancelled when the request is; it fires
// whatever bytes keep trickling in, and answers 408 and closes. The request's body bytes are
// charged to the process-wide memory budget (server_budget.h): a declared Content-Length before
// any body byte is read, a chunked body piece by piece; no room is 503 and close. The charge goes
// with the request into its stream.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cutline/proto/http/http_server.h"
#include "cutline/proto/http/server_budget.h"
#include "cutline/proto/http/server_stream.h"
#include "cutline/proto/http1/http1_parser.h"
#include "cutline/proto/net/connection.h"
#include "cutline/proto/net/timer.h"
#include "server_connection.h"
#include "stream_callbacks.h"

namespace cutline::proto {

class Http1ServerStream;

class Http1ServerConnection final : public ServerConnection,
                                    public Connection::Handler,
                                    public Http1Parser::Sink {
 public:
  // Takes over `conn` (an accepted connection, TLS handshake done or under way; bytes it already
  // read stay in its input and are parsed on the next on_readable()). `tls`: the context `conn`
  // was made with (null for cleartext).
  Http1ServerConnection(ServerConnectionHost& host, std::unique_ptr<Connection> conn,
                        std::shared_ptr<const TlsContext> tls);
  ~Http1ServerConnection() override;

  // Server stop: closes the socket now; an open stream gets its on_close.
  void shutdown() override;
  size_t unsent_bytes() const override { return ended_ ? 0 : conn_->output_bytes(); }
  // Connection::Handler (public: the protocol sniffer hands over the bytes it peeked at).
  void on_readable(evbuffer* input) override;

  // For the stream.
  Connection& connection() { return *conn_; }
  // The client's "address:port", read once per connection (not per request).
  const std::string& peer_address() const { return peer_; }
  // The stream completed its response; `close` when the connection must not be reused.
  void stream_finished(bool close);
  // The stream's owner reset() it: close now.
  void stream_reset();

 private:
  // Connection::Handler
  void on_bytes(Connection& conn, std::string_view data) override;
  void on_drained() override;
  void on_closed(Connection::CloseReason reason, std::string_view message) override;
  // Http1Parser::Sink
  bool on_head(Http1Head& head) override;
  bool on_body(std::string_view data) override;
  bool on_message_complete(HttpHeaders& trailers) override;

  void parse_input(evbuffer* input);
  // One parser step over `bytes` (`consumed`: how many it took), then what it asks for:
  // act_on() fails the request, dispatches the complete one, or asks for more (false: stop).
  enum class Fed { kMore, kReady, kFailed };
  Fed feed(std::string_view bytes, size_t& consumed);
  bool act_on(Fed fed);
  void fail_request(const Error& error);
  void end();
  // Arms, re-arms or cancels request_timer_ for where the request being read is.
  void update_request_timer();
  void on_request_timeout();

  // Which deadline request_timer_ is armed for.
  enum class Waiting { kNothing, kHead, kBody };

  ServerConnectionHost& host_;
  std::unique_ptr<Connection> conn_;
  Http1Parser parser_;
  HttpRequest pending_;                        // the request being parsed
  std::shared_ptr<Http1ServerStream> stream_;  // the request being answered
  bool keep_alive_ = true;                     // of the pending request
  bool request_ready_ = false;                 // pending_ is complete, not yet dispatched
  bool in_parse_ = false;                      // inside parse_input (no re-entry)
  std::string peer_;                           // the client's address:port
  bool ended_ = false;
  bool first_request_ = true;  // nothing parsed yet: the head deadline runs from the accept
  // request_timer_: armed for the head deadline while a head is being read (from the accept for
  // the first request), for the body deadline from the head's end; cancelled when the request
  // is complete, failed, or the connection ends.
  Timer request_timer_;
  Waiting waiting_ = Waiting::kNothing;
  RequestCharge charge_;          // pending_'s body bytes in the memory budget
  std::optional<Error> refused_;  // set by a parser callback that paused to refuse
};

class Http1ServerStream final : public ServerStream {
 public:
  Http1ServerStream(Http1ServerConnection& conn, EventLoop& loop, HttpRequest request,
                    bool keep_alive, RequestCharge charge);

  HttpRequest& request() override { return request_; }
  EventLoop& loop() const override { return loop_; }
  std::string_view protocol() const override;
  std::string peer_address() const override { return peer_; }

  bool send_head(int status, const HttpHeaders& headers, BodyFraming framing) override;
  bool send_body(std::string_view data) override;
  bool finish(const HttpHeaders& trailers) override;
  bool send_simple(int status, const HttpHeaders& headers, std::string_view body) override;
  void reset() override;

  void on_writable(std::function<void()> callback) override;
  void on_close(std::function<void()> callback) override;

  bool closed() const override { return closed_; }
  bool head_sent() const override { return head_sent_; }
  bool finished() const override { return finished_; }
  size_t buffered_bytes() const override;
  const void* send_path_hint() const override { return connection_; }

  // From the connection.
  void notify_writable();
  void notify_closed();

 private:
  bool writable() const;
  void end_exchange(bool close_connection);

  // What send_body() reads for every token first, together (one cache line, not three).
  Http1ServerConnection* conn_;  // null once the exchange ended
  Connection* connection_;       // conn_'s connection (valid while conn_ is set)
  BodyFraming framing_;
  uint64_t body_sent_ = 0;
  bool keep_alive_;
  bool head_request_;
  bool head_sent_ = false;
  bool finished_ = false;
  bool closed_ = false;
  EventLoop& loop_;
  HttpRequest request_;
  std::string peer_;
  StreamCallbacks callbacks_;
  RequestCharge charge_;  // the request's bytes in the memory budget, until this is destroyed
};

}  // namespace cutline::proto
