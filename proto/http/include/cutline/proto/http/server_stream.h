#pragma once
// ServerStream: one request/response exchange on the server side, independent of the protocol.
// The HTTP/1.1 and HTTP/2 servers both implement it, so the gateway's phases never see which
// protocol a client speaks.
//
// Who calls what: the HttpServer creates a stream when a request's head and body (buffered up to
// Http1Limits::max_body_bytes) have arrived and passes it to the ServerHandler. The handler (and
// whatever it hands the stream to: the gateway's per-stream state, the backend's engine
// callbacks) answers with either send_simple(), or send_head() + send_body()* + finish().
//
// Threading: every method on the stream's loop() thread only; callbacks run on that thread.
// Work done elsewhere comes back with loop().post().
//
// Lifetime: the handler receives a std::shared_ptr; hold it as long as you need the stream. The
// connection holds the other reference until the exchange ends (so code that keeps only a raw
// pointer must not touch the stream after its finish()/reset()/send_simple() returned). After the
// stream is closed (closed() true) or finished, every send_* returns false and does nothing, and
// the stream drops its callbacks (so callbacks that capture the shared_ptr do not keep it alive).
// No callback ever runs after close or after finish() returned.
//
// Back-pressure: send_body() always queues the data; it returns false when the connection's
// queued output is above the high-water mark (or the stream is closed). The producer then stops
// (e.g. pauses its upstream read) until the on_writable callback runs, which happens each time the
// queued output falls back to the low-water mark.
//
// Relay recipe (the gateway's relay phase, all on the stream's loop thread, with an HttpClient
// on the same loop):
//   upstream on_body(data):   if (!stream->send_body(data)) handle.pause();
//   stream->on_writable(...): handle.resume();
//   stream->on_close(...):    handle.cancel();   // client_cancel: the upstream sees a close
//   upstream on_error(e):     e.kind == kClosedMidBody -> upstream_disconnect
//
// Cancellation: on_close's callback runs exactly once when the exchange ends before finish()
// (or send_simple()) completed it: the client disconnected, the connection failed or timed out,
// or the server stopped. This is how the gateway detects client_cancel. It does not run for the
// owner's own reset().

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "cutline/proto/http1/http1_writer.h"
#include "cutline/proto/http1/http_message.h"

namespace cutline::proto {

class EventLoop;

class ServerStream {
 public:
  virtual ~ServerStream() = default;

  // The request: head, body (fully buffered), trailers of a chunked request body. Mutable so the
  // handler may move the body out.
  virtual HttpRequest& request() = 0;
  virtual EventLoop& loop() const = 0;
  // "HTTP/1.1", "HTTP/1.0" (later "h2").
  virtual std::string_view protocol() const = 0;
  // "ip:port" of the client.
  virtual std::string peer_address() const = 0;

  // Sends the status line and headers. `framing` picks the body delimitation: BodyFraming::
  // length(n), chunked(), until_close() or none(); framing headers (Content-Length,
  // Transfer-Encoding, Connection) are written by the stream, those in `headers` are ignored. To
  // send trailers with a chunked body, announce them with a `Trailer` header here. A chunked
  // response to an HTTP/1.0 client is sent until-close (and its trailers are dropped). Returns
  // false when closed or a head was already sent.
  virtual bool send_head(int status, const HttpHeaders& headers, BodyFraming framing) = 0;
  // Sends body bytes (framed as a chunk when chunked; empty data sends nothing). Returns false
  // when the producer should wait for on_writable (output above high water) or the stream is
  // closed (see closed()). For a content-length body, bytes beyond the announced length are an
  // error: they are dropped, the connection is closed after the announced bytes, and false is
  // returned.
  virtual bool send_body(std::string_view data) = 0;
  // Completes the response: the last chunk with `trailers` when chunked; for until-close, closes
  // the connection after the output is flushed; for content-length, checks the announced length
  // was sent (else the connection is closed so the client sees a truncated body). After finish()
  // the stream is done; the connection serves its next request (keep-alive). Returns false when
  // closed or no head was sent.
  virtual bool finish(const HttpHeaders& trailers = {}) = 0;
  // send_head with a Content-Length body + send_body + finish, in one call. Put Content-Type in
  // `headers`.
  virtual bool send_simple(int status, const HttpHeaders& headers, std::string_view body) = 0;
  // Ends the exchange without completing it: HTTP/1.1 closes the connection (the client sees a
  // truncated response); HTTP/2 will reset the stream. on_close is not called.
  virtual void reset() = 0;

  // Registers the drain callback (replaces any earlier one).
  virtual void on_writable(std::function<void()> callback) = 0;
  // Registers the close callback (replaces any earlier one). When the stream is already closed,
  // the callback runs at once, inside this call, unless it already ran for an earlier callback.
  virtual void on_close(std::function<void()> callback) = 0;

  // No more output is possible (peer gone, failed, reset() or server stop).
  virtual bool closed() const = 0;
  virtual bool head_sent() const = 0;
  // finish() or send_simple() completed the response.
  virtual bool finished() const = 0;
  // Response bytes queued on the connection and not yet taken by the kernel.
  virtual size_t buffered_bytes() const = 0;
  // An address send_body() reads first (its transport), for a caller to prefetch; may be null.
  virtual const void* send_path_hint() const { return nullptr; }
};

}  // namespace cutline::proto
