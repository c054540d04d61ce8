#pragma once
// Http1Parser: an incremental HTTP/1.1 request or response parser on llhttp. Bytes may arrive in
// any split (one byte at a time included); the parser reports the head, the decoded body (chunked
// framing removed) and the trailers of a chunked body to a Sink, and enforces size limits.
//
// Pipelining and back-pressure: every Sink callback returns whether to go on. Returning false
// pauses the parser right after that event: feed() returns the number of bytes consumed so far
// and the caller keeps the rest (in its input evbuffer) until it calls resume() and feeds them
// again. The HTTP/1.1 server pauses at every message end so a pipelined request is parsed only
// after the response to the previous one is finished; the client pauses body delivery while its
// consumer is slow.
//
// Errors are values: a protocol violation or a limit ends the parser with an Error whose kind
// says what to answer: kHeadersTooLarge (431: header bytes or count), kTooLarge (413: body bytes,
// checked against Content-Length before any body byte arrives), kBadRequest (400: malformed).
// After an error the parser stays failed until reset().
//
// Strict framing (what a proxy in front of us might read differently, RFC 9112): on top of what
// llhttp rejects itself (a bare CR or LF ending a line, Content-Length together with
// Transfer-Encoding, a duplicate or list-valued Content-Length, chunked applied twice), the
// parser rejects obsolete line folding in headers and trailers, a field name that is not a token
// (whitespace before the colon), Transfer-Encoding in an HTTP/1.0 request, and chunk extensions
// over Http1Limits::max_chunk_extension_bytes. All of them are kBadRequest.
//
// Threading: none; one parser per connection, used on that connection's thread.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/proto/http1/http_message.h"

namespace cutline::proto {

struct Http1Limits {
  // Request target (or status reason) plus every header name and value, in bytes. Trailers are
  // counted separately against the same limit.
  size_t max_header_bytes = 64 * 1024;
  // Header fields per message (and, separately, trailer fields).
  size_t max_header_count = 100;
  // Decoded body bytes per message; 0 = unlimited (what a client parsing a streamed response
  // uses).
  size_t max_body_bytes = 8 * 1024 * 1024;
  // Chunk-extension bytes (names and values after ';' on chunk-size lines) per message. Nothing
  // we serve uses them; the bound keeps a peer from streaming unbounded bytes that no sink sees.
  size_t max_chunk_extension_bytes = 4096;
};

// The start line and headers of one message, filled by the parser. The Sink may move fields out
// of it in on_head().
struct Http1Head {
  std::string method;  // requests: as sent
  std::string target;  // requests: request-target as sent
  int status = 0;      // responses
  std::string reason;  // responses
  int version_major = 1;
  int version_minor = 1;
  HttpHeaders headers;
  // Whether the connection may carry another message after this one, from the version and the
  // Connection header (HTTP/1.1 unless "close"; HTTP/1.0 only with "keep-alive").
  bool keep_alive = true;
  bool chunked = false;                    // Transfer-Encoding: chunked
  std::optional<uint64_t> content_length;  // Content-Length when present
  bool expect_continue = false;            // requests: Expect: 100-continue
};

class Http1Parser {
 public:
  enum class Type { kRequest, kResponse };
  // Where the current message is: kIdle (between messages), kHead (start line/headers being
  // read), kBody (head done, body or trailers being read). A connection closed in kBody is a
  // truncated message ("closed mid-body").
  enum class Phase { kIdle, kHead, kBody };

  // Receives the parse events. Each returns true to continue, false to pause after the event.
  class Sink {
   public:
    virtual ~Sink() = default;
    virtual bool on_head(Http1Head& head) = 0;
    // A piece of the decoded body (never empty).
    virtual bool on_body(std::string_view data) = 0;
    // The message is complete. `trailers` holds the trailer fields of a chunked body (empty
    // otherwise). Keep-alive for this message is in the head passed to on_head().
    virtual bool on_message_complete(HttpHeaders& trailers) = 0;
  };

  Http1Parser(Type type, const Http1Limits& limits, Sink& sink);
  ~Http1Parser();
  Http1Parser(const Http1Parser&) = delete;
  Http1Parser& operator=(const Http1Parser&) = delete;

  // Parses `data`; returns the bytes consumed. That is data.size() unless a callback paused the
  // parser (then paused() is true and the caller feeds the rest after resume()). Feeding while
  // paused consumes nothing.
  Result<size_t> feed(std::string_view data);
  void resume();
  bool paused() const { return paused_; }

  // The peer closed its sending side. Completes a response whose body is delimited by the close
  // (no Content-Length, not chunked) with on_message_complete. Returns an Error (kBadRequest,
  // message names the phase) when a message was cut: in kHead ("closed before end of head") or
  // kBody ("closed mid-body"). OK when idle.
  Status finish();

  // Responses only: the next response answers a HEAD request, so it has no body whatever its
  // headers say. Cleared after that response.
  void set_head_response(bool head_response) { head_response_ = head_response; }

  Phase phase() const { return phase_; }
  Type type() const { return type_; }

  // Back to a fresh parser (new connection), keeping type, limits and sink.
  void reset();
  // Between messages (phase() == kIdle): frees the parser state (about 450 bytes) until the
  // next feed(), which starts a fresh one, as after reset(). A server connection calls it while
  // its response streams: the next request, if any, comes only after that. No effect otherwise.
  void release_idle();

 private:
  struct Impl;
  friend struct Impl;

 public:
  // The parser's state (for a connection to prefetch before it reads).
  const void* state_address() const { return impl_.get(); }
  static uint32_t state_bytes();

 private:
  Type type_;
  Http1Limits limits_;
  Sink& sink_;
  std::unique_ptr<Impl> impl_;
  Phase phase_ = Phase::kIdle;
  bool paused_ = false;
  bool head_response_ = false;
};

}  // namespace cutline::proto
