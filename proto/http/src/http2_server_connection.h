#pragma once
// Internal to proto/: the HTTP/2 server side of one connection (h2c with prior knowledge, or h2
// negotiated by ALPN over TLS), on an nghttp2 server session driven in memory: bytes read are fed
// to nghttp2_session_mem_recv, frames nghttp2 produces (nghttp2_session_mem_send) are copied into
// the Connection's output. Each request stream becomes an Http2ServerStream handed to the
// handler (http2_server_stream.h), so the handler never sees which protocol a client speaks.
//
// Callbacks: nghttp2 callbacks only record what happened (a request is complete, a stream was
// closed); the handler and the streams' on_close run after nghttp2_session_mem_recv returned, so
// nothing the handler does re-enters the session from inside one of its callbacks.
//
// Output: frames are produced while the connection's output is under the high-water mark; above
// it, the rest waits in the streams' own buffers until the output drains (on_drained). Flow
// control is nghttp2's: a stream whose window is closed is skipped, the others keep flowing.
//
// Settings: SETTINGS_MAX_CONCURRENT_STREAMS from ServerOptions::http2_max_concurrent_streams,
// an initial stream window of ServerOptions::http2_initial_window_bytes for request bodies.
// drain() sends GOAWAY with the last stream id processed; the connection closes once its streams
// are done. With no open stream, the idle timeout applies.
//
// Hostile clients: a stream's head must be complete within request_header_timeout_ms of its
// HEADERS (else GOAWAY and close: the connection is stuck inside a header block) and its body
// within request_body_timeout_ms of the head (else 408 on the stream); at most
// http2_max_unfinished_streams streams may be waiting for their body and hold at most
// http2_max_buffered_request_bytes (else 503 on the new stream); a body's bytes count against the
// process-wide memory budget (else 503). RST_STREAMs from the client are counted in a token
// bucket (http2_max_resets_per_s, burst twice that): past it, GOAWAY(ENHANCE_YOUR_CALM) and
// close. A stream reset before the handler got it never reaches the handler.

#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/base/result.h"
#include "cutline/proto/net/connection.h"
#include "cutline/proto/net/timer.h"
#include "http2_server_stream.h"
#include "server_connection.h"

namespace cutline::proto {

class Http2ServerConnection final : public ServerConnection, public Connection::Handler {
 public:
  // Takes over `conn`; bytes already in its input (the client preface) are read on the next
  // on_readable(). Queues the server's SETTINGS (and GOAWAY when the host is draining).
  Http2ServerConnection(ServerConnectionHost& host, std::unique_ptr<Connection> conn,
                        std::shared_ptr<const TlsContext> tls);
  ~Http2ServerConnection() override;

  void shutdown() override;
  void drain() override;
  size_t unsent_bytes() const override;
  // Connection::Handler (on_readable public: the protocol sniffer hands over the input).
  void on_readable(evbuffer* input) override;
  void on_drained() override;
  void on_closed(Connection::CloseReason reason, std::string_view message) override;

  // ---- For the streams ----
  EventLoop& loop() { return host_.loop(); }
  const ServerOptions& options() const { return host_.options(); }
  // Queues the response HEADERS; with `has_body`, a data provider reading the stream's buffer.
  bool submit_response(Http2ServerStream& stream, int status, const HttpHeaders& headers,
                       BodyFraming framing, bool has_body);
  void submit_trailers(int32_t stream_id, const HttpHeaders& trailers);
  void resume_data(int32_t stream_id);
  void reset_stream(int32_t stream_id, uint32_t error_code);
  // The stream's buffer drained to low water after send_body returned false.
  void queue_writable(Http2ServerStream& stream);
  // Sends what nghttp2 has (up to the output's high-water mark) in one write; runs due
  // on_writable callbacks.
  void flush();
  // flush() later in this loop turn, once: the body pieces that several streams of this
  // connection send in one turn (one upstream read each) leave in one write, as frames of one
  // segment, instead of one send() per piece.
  void flush_soon();

 private:
  enum class EventKind { kRequest, kReject, kClosed };
  struct Event {
    EventKind kind;
    std::shared_ptr<Http2ServerStream> stream;
    Error error;  // kReject
  };

  static int on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void* self);
  static int on_header(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                       size_t name_len, const uint8_t* value, size_t value_len, uint8_t flags,
                       void* self);
  static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* self);
  static int on_data_chunk(nghttp2_session* session, uint8_t flags, int32_t stream_id,
                           const uint8_t* data, size_t len, void* self);
  static int on_stream_close(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                             void* self);
  static ssize_t read_body(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                           uint32_t* data_flags, nghttp2_data_source* source, void* self);

  Http2ServerStream* stream(int32_t stream_id);
  // Answers a request the handler will not see (413, 431) with the server's own JSON error.
  void reject(Http2ServerStream& stream, const Error& error);
  void answer_error(Http2ServerStream& stream, const Error& error);
  void run_events();
  // Deadlines: arms request_timer_ for the earliest one of the streams still arriving; on
  // firing, answers (or ends the connection for) those past theirs.
  void schedule_deadline();
  void on_deadline();
  // The stream's body bytes leave the connection's buffered total (dispatched, rejected, closed).
  void uncount(Http2ServerStream& stream);
  // A client RST_STREAM: false once the connection is past its reset rate.
  bool take_reset();
  // GOAWAY with `error_code`, then close once it is sent; no stream is dispatched any more.
  void terminate(uint32_t error_code);
  void update_idle_timer();
  void close_if_done();
  void end();
  void end_streams();
  static void on_flush_soon(evutil_socket_t fd, short what, void* self);

  ServerConnectionHost& host_;
  std::unique_ptr<Connection> conn_;
  nghttp2_session* session_ = nullptr;
  std::string peer_;
  // Streams nghttp2 has open (request received or being answered), by id.
  std::unordered_map<int32_t, std::shared_ptr<Http2ServerStream>> streams_;
  std::vector<Event> events_;  // recorded inside nghttp2 callbacks, run after mem_recv
  std::vector<std::shared_ptr<Http2ServerStream>> writable_;  // due on_writable callbacks
  // Scratch for response headers (lower-cased names) and the nghttp2_nv array pointing into it.
  std::string header_names_;
  std::vector<nghttp2_nv> nva_;
  event* flush_event_ = nullptr;  // flush_soon's (created on first use)
  bool flush_scheduled_ = false;
  bool in_recv_ = false;    // inside nghttp2_session_mem_recv: flush after it returns
  bool in_flush_ = false;   // inside flush's send loop
  bool in_events_ = false;  // inside run_events
  bool goaway_sent_ = false;
  bool idle_armed_ = false;
  bool ended_ = false;
  bool terminating_ = false;  // terminate(): dispatch nothing more
  bool too_many_resets_ = false;
  // request_timer_: armed for the earliest head or body deadline among the streams still
  // arriving (not dispatched, not rejected); cancelled when there is none or the connection ends.
  Timer request_timer_;
  int64_t timer_at_ms_ = 0;            // when request_timer_ fires (0: not armed)
  size_t buffered_request_bytes_ = 0;  // body bytes of the streams still arriving
  double reset_tokens_ = 0;            // the reset rate's bucket
  int64_t reset_refill_ms_ = 0;        // when the bucket was last refilled
  base::MonotonicClock clock_;         // deadlines and the reset rate
};

}  // namespace cutline::proto
