#pragma once
// Internal to proto/: one HTTP/2 request stream on the server side, as the protocol-independent
// ServerStream the handler sees (server_stream.h). Http2ServerConnection creates it when the
// request's HEADERS arrive, fills in the request, and dispatches it once the request has ended
// (END_STREAM) and its body fits the limit.
//
// Output: send_body() appends to this stream's own buffer (reused: no allocation per chunk once
// it has grown) and asks the connection to flush; the connection's nghttp2 session pulls from the
// buffer through the data provider (read_body()) as far as this stream's and the connection's
// flow-control windows allow. So a client that does not open one stream's window stalls only that
// stream: its buffer grows past the high-water mark, its send_body() returns false, and its
// on_writable runs once the buffer has drained to the low-water mark. buffered_bytes() is this
// stream's buffer.
//
// Ending: finish() marks the end of the body; the last DATA frame carries END_STREAM, or, with
// trailers, a HEADERS frame after it does. reset() sends RST_STREAM(CANCEL). A RST_STREAM from
// the client, or the connection ending, before finish() runs on_close.

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <functional>
#include <string>

#include "cutline/proto/http/server_budget.h"
#include "cutline/proto/http/server_stream.h"
#include "stream_callbacks.h"

namespace cutline::proto {

class Http2ServerConnection;

class Http2ServerStream final : public ServerStream {
 public:
  Http2ServerStream(Http2ServerConnection& conn, int32_t id);

  HttpRequest& request() override { return request_; }
  EventLoop& loop() const override { return loop_; }
  std::string_view protocol() const override { return "h2"; }
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
  size_t buffered_bytes() const override { return out_.size() - out_offset_; }

  // ---- For the connection ----
  int32_t id() const { return id_; }
  void set_peer(std::string peer) { peer_ = std::move(peer); }
  // Request assembly (before dispatch).
  bool dispatched() const { return dispatched_; }
  void mark_dispatched() { dispatched_ = true; }
  size_t request_header_bytes = 0;  // names + values received, against limits.max_header_bytes
  bool rejected = false;  // answered by the server (408, 413, 431, 503): body ignored, no dispatch
  bool headers_done = false;    // the request's header block is complete
  int64_t deadline_ms = 0;      // steady-clock ms by which the head (then the body) must be in
  size_t buffered_counted = 0;  // body bytes counted in the connection's buffered total
  RequestCharge charge;         // the body's bytes in the process-wide memory budget
  // nghttp2's data source callback: copies up to `length` buffered bytes into `buf`.
  ssize_t read_body(uint8_t* buf, size_t length, uint32_t* data_flags);
  // The output buffer fell to the low-water mark after send_body() returned false.
  void notify_writable();
  // The stream ended on the wire (RST_STREAM, connection end, or the response completed).
  void notify_closed();
  // The connection is gone: no more calls into it.
  void detach() { conn_ = nullptr; }

 private:
  // Active for the owner: the connection is there and neither finish(), reset() nor a close ended
  // the exchange.
  bool active() const { return conn_ != nullptr && !finished_ && !closed_; }
  bool writable();
  // send_head without flushing.
  bool submit_head(int status, const HttpHeaders& headers, BodyFraming framing);
  void append(std::string_view data);
  void resume();
  // Owner-side end (reset, over-long body): RST_STREAM with `error_code`, no on_close.
  void cancel(uint32_t error_code);
  void drop_callbacks();

  Http2ServerConnection* conn_;  // null once the connection ended
  EventLoop& loop_;
  int32_t id_;
  HttpRequest request_;
  std::string peer_;
  BodyFraming framing_;
  uint64_t body_sent_ = 0;
  // Response body bytes not yet taken by nghttp2: out_[out_offset_, size).
  std::string out_;
  size_t out_offset_ = 0;
  HttpHeaders trailers_;
  bool dispatched_ = false;
  bool head_sent_ = false;
  bool has_body_ = false;          // a data provider was submitted with the head
  bool eof_ = false;               // finish(): the body ends once out_ is sent
  bool deferred_ = false;          // read_body returned NGHTTP2_ERR_DEFERRED (needs resume)
  bool blocked_ = false;           // send_body returned false: on_writable is due
  bool complete_on_wire_ = false;  // END_STREAM went with the head (no body)
  bool finished_ = false;
  bool closed_ = false;
  StreamCallbacks callbacks_;
};

}  // namespace cutline::proto
