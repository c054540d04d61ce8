#pragma once
// Internal to proto/: HttpClient's HTTP/2 side (ClientRequest::protocol kHttp2, or kAuto over
// TLS when the upstream selects "h2" by ALPN).
//   Http2Exchange          one request on an HTTP/2 stream, from start() to its single outcome
//                          (or cancel()); the same ClientCallbacks contract as HTTP/1.1.
//   Http2ClientConnection  one upstream connection with one nghttp2 client session multiplexing
//                          many exchanges (up to the peer's SETTINGS_MAX_CONCURRENT_STREAMS).
//   HttpClient::Http2Pool  the connections per host:port (and TLS context): a request takes the
//                          first connection with a free stream slot, or opens another one.
//
// Flow control: the connection window is given back as soon as DATA arrives (so one slow stream
// never stalls its neighbours), a stream's window only once its bytes were handed to on_body.
// pause() therefore stops that stream alone: what arrives while paused (at most the stream
// window, kStreamWindowBytes) is held and delivered on resume(); the upstream then waits for
// WINDOW_UPDATE. cancel() sends RST_STREAM(CANCEL) for that stream; the connection stays.
//
// Errors: RST_STREAM from the upstream, GOAWAY that drops a stream, or the connection lost:
// kClosedMidBody once the head arrived, kClosedBeforeHead before. A stream the upstream refused
// (GOAWAY above its last stream id, REFUSED_STREAM) never reached it and is retried once on
// another connection, and so is one whose connection (after serving earlier streams) closed
// before any of its response arrived (the usual keep-alive race, as for HTTP/1.1).

#include <nghttp2/nghttp2.h>
#include <sys/socket.h>

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cutline/proto/http/http_client.h"
#include "cutline/proto/net/connection.h"

struct event;

namespace cutline::proto {

class Http2ClientConnection;

class Http2Exchange : public std::enable_shared_from_this<Http2Exchange> {
 public:
  Http2Exchange(HttpClient::Http2Pool& pool, ClientRequest request, ClientCallbacks callbacks);

  void cancel();
  void pause();
  void resume();
  bool active() const { return state_ == State::kActive; }
  bool paused() const { return paused_; }

  // From the connection (each checks that the exchange is still active).
  void deliver_head(int status, HttpHeaders& headers);
  // Body bytes: handed to on_body now, or held while paused.
  void deliver_body(std::string_view data);
  // The stream ended (END_STREAM); completes now or after the held body once resumed.
  void end_stream(HttpHeaders& trailers);
  void fail(const ClientError& error);
  // The client is being destroyed: end without callbacks.
  void abandon();
  // Delivers what was held during a pause (from the loop after resume()).
  void flush_held();

  ClientRequest& request() { return request_; }
  bool head_delivered() const { return head_delivered_; }
  bool ended() const { return ended_; }

  std::string key;  // pool key: host:port (and TLS context)
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  int32_t stream_id = -1;  // -1 until submitted
  bool retried = false;    // refused by the upstream once already and sent again
  bool reused = false;     // submitted on a connection that had already completed streams
  Http2ClientConnection* connection = nullptr;
  // kAuto over TLS that found an HTTP/1.1 upstream: the request continues on HTTP/1.1.
  ClientHandle fallback;

 private:
  enum class State { kActive, kDone };
  void finish_state();
  void after_callback();
  void complete_now();

  HttpClient::Http2Pool* pool_;  // null once done
  ClientRequest request_;
  ClientCallbacks callbacks_;
  State state_ = State::kActive;
  bool paused_ = false;
  bool head_delivered_ = false;
  bool ended_ = false;  // END_STREAM seen; completes once the held body is delivered
  bool flush_posted_ = false;
  std::string held_;  // body received while paused
  HttpHeaders trailers_;
  int in_callback_ = 0;
};

class Http2ClientConnection final : public Connection::Handler {
 public:
  // Stream receive window (per stream: what one paused stream may hold).
  static constexpr int32_t kStreamWindowBytes = 256 * 1024;
  // Connection receive window (given back at once, so large enough for many streams in flight).
  static constexpr int32_t kConnectionWindowBytes = 16 * 1024 * 1024;
  // Streams per connection before the peer's SETTINGS arrive (and the most we ever use).
  static constexpr uint32_t kDefaultMaxStreams = 100;

  Http2ClientConnection(HttpClient::Http2Pool& pool, std::string key, bool auto_protocol);
  ~Http2ClientConnection() override;

  // Starts connecting. `ssl` (ownership taken): TLS with ALPN "h2" (and "http/1.1" when
  // auto_protocol). False when no socket could be created.
  bool connect(const sockaddr* addr, socklen_t addr_len, ssl_st* ssl);
  // Room for one more stream (not closing, not going away, under the peer's stream limit).
  bool has_capacity() const;
  // Takes `exchange`: submitted now, or once the connection is ready.
  void add(std::shared_ptr<Http2Exchange> exchange);
  // The exchange was cancelled: RST_STREAM(CANCEL) (or dropped before it was sent).
  void cancel_stream(Http2Exchange* exchange);
  // The exchange's held body was delivered: give its stream window back.
  void consumed(int32_t stream_id, size_t bytes);
  // Closes the socket (client destruction); no callbacks.
  void close_now();
  const std::string& key() const { return key_; }
  size_t streams() const { return by_stream_.size() + pending_.size(); }

 private:
  void on_connected() override;
  void on_readable(evbuffer* input) override;
  void on_drained() override;
  void on_closed(Connection::CloseReason reason, std::string_view message) override;

  bool start_session();
  void submit(const std::shared_ptr<Http2Exchange>& exchange);
  // Writes what nghttp2 has to send; closes when the session is done.
  void flush();
  // Fails or re-routes every exchange and retires this connection.
  // `lost`: the connection closed under established streams (reused ones without a response
  // byte are retried once elsewhere).
  void fail_all(ClientErrorKind kind, const std::string& message, bool lost = false);
  void retire();
  void note_idle();
  std::shared_ptr<Http2Exchange> find(int32_t stream_id) const;

  static int on_header(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                       size_t name_len, const uint8_t* value, size_t value_len, uint8_t flags,
                       void* user_data);
  static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
  static int on_data_chunk(nghttp2_session* session, uint8_t flags, int32_t stream_id,
                           const uint8_t* data, size_t len, void* user_data);
  static int on_stream_close(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                             void* user_data);
  static ssize_t read_body(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                           uint32_t* data_flags, nghttp2_data_source* source, void* user_data);

  struct StreamState {
    std::shared_ptr<Http2Exchange> exchange;
    HttpHeaders headers;  // the response head or trailers being received
    int status = 0;
    size_t body_offset = 0;  // request body bytes handed to nghttp2
  };

  HttpClient::Http2Pool& pool_;
  std::string key_;
  bool auto_protocol_;
  std::unique_ptr<Connection> conn_;
  ssl_st* ssl_ = nullptr;  // owned by conn_; read for the negotiated ALPN
  nghttp2_session* session_ = nullptr;
  std::unordered_map<int32_t, StreamState> by_stream_;
  std::deque<std::shared_ptr<Http2Exchange>> pending_;  // waiting for the connection
  bool connected_ = false;
  bool going_away_ = false;  // GOAWAY received or sent: no new streams
  bool retired_ = false;
  bool in_recv_ = false;    // inside nghttp2_session_mem_recv (no send, no close)
  uint64_t completed_ = 0;  // streams that ended normally on this connection
};

struct HttpClient::Http2Pool {
  Http2Pool(HttpClient& client, EventLoop& loop, const ClientOptions& options);
  ~Http2Pool();

  // Starts `request` on a connection to `key` with a free stream slot, opening one if needed.
  ClientHandle start(std::shared_ptr<Http2Exchange> exchange);
  // Places an exchange (new, or refused and retried) on a connection.
  void place(std::shared_ptr<Http2Exchange> exchange);
  void retire(Http2ClientConnection* connection);
  // kAuto over TLS: the upstream at `key` speaks HTTP/1.1 (ALPN did not select h2).
  void remember_http1(const std::string& key) { http1_keys.insert(key); }
  bool known_http1(const std::string& key) const { return http1_keys.count(key) > 0; }
  static void on_sweep(int fd, short what, void* arg);

  HttpClient& client;
  EventLoop& loop;
  const ClientOptions& options;
  std::unordered_map<std::string, std::vector<Http2ClientConnection*>> by_key;
  std::unordered_map<Http2ClientConnection*, std::unique_ptr<Http2ClientConnection>> all;
  std::vector<std::unique_ptr<Http2ClientConnection>> graveyard;
  std::unordered_set<Http2Exchange*> active;
  std::unordered_set<std::string> http1_keys;
  event* sweep_event = nullptr;
};

}  // namespace cutline::proto
