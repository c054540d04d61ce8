#include "http1_server_connection.h"

#include <event2/buffer.h>

#include <algorithm>
#include <cstring>

#include "cutline/proto/http1/http1_writer.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::proto {

namespace {

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr size_t kSmallChunkBytes = 2048;

}  // namespace

// ---- Http1ServerConnection ----------------------------------------------------------------------

Http1ServerConnection::Http1ServerConnection(ServerConnectionHost& host,
                                             std::unique_ptr<Connection> conn,
                                             std::shared_ptr<const TlsContext> tls)
    : host_(host),
      conn_(std::move(conn)),
      parser_(Http1Parser::Type::kRequest, host.options().limits, *this),
      request_timer_(host.loop(), [this] { on_request_timeout(); }),
      charge_(host.options().budget) {
  tls_ = std::move(tls);
  peer_ = conn_->peer_address();
  conn_->set_handler(*this);
  conn_->set_read_timeout(host_.options().idle_timeout_ms);
  update_request_timer();
}

Http1ServerConnection::~Http1ServerConnection() = default;

void Http1ServerConnection::update_request_timer() {
  Waiting want = Waiting::kNothing;
  if (!ended_ && !stream_ && !request_ready_ && !refused_) {
    if (parser_.phase() == Http1Parser::Phase::kHead || first_request_) {
      want = Waiting::kHead;
    } else if (parser_.phase() == Http1Parser::Phase::kBody) {
      want = Waiting::kBody;
    }
  }
  if (want == waiting_) return;
  waiting_ = want;
  const ServerOptions& o = host_.options();
  const int64_t ms = want == Waiting::kHead   ? o.request_header_timeout_ms
                     : want == Waiting::kBody ? o.request_body_timeout_ms
                                              : 0;
  if (ms > 0) {
    request_timer_.arm(ms);
  } else {
    request_timer_.cancel();
  }
}

void Http1ServerConnection::on_request_timeout() {
  if (ended_ || waiting_ == Waiting::kNothing) return;
  const bool head = waiting_ == Waiting::kHead;
  const int64_t ms =
      head ? host_.options().request_header_timeout_ms : host_.options().request_body_timeout_ms;
  waiting_ = Waiting::kNothing;
  refused_ =
      Error{ErrorKind::kRequestTimeout, std::string(head ? "request head" : "request body") +
                                            " not complete within " + std::to_string(ms) + " ms"};
  fail_request(*refused_);
}

void Http1ServerConnection::shutdown() {
  if (ended_) return;
  ended_ = true;
  request_timer_.cancel();
  conn_->close();
  if (auto stream = std::move(stream_)) stream->notify_closed();
}

void Http1ServerConnection::end() {
  if (ended_) return;
  ended_ = true;
  request_timer_.cancel();
  conn_->close();
  if (auto stream = std::move(stream_)) stream->notify_closed();
  host_.retire(this);
}

void Http1ServerConnection::stream_finished(bool close) {
  stream_.reset();
  if (ended_) return;
  if (close || !keep_alive_) {
    conn_->close_after_flush();
    return;
  }
  conn_->set_read_timeout(host_.options().idle_timeout_ms);
  conn_->set_reading(true);
  // A pipelined request may already be buffered: parse it from the loop, not inside finish().
  if (!in_parse_) conn_->trigger_read();
}

void Http1ServerConnection::stream_reset() {
  stream_.reset();
  end();
}

void Http1ServerConnection::on_readable(evbuffer* input) {
  if (ended_ || refused_) {
    if (input != nullptr) evbuffer_drain(input, evbuffer_get_length(input));
    return;
  }
  if (stream_) {
    // A response is in progress: pipelined bytes wait. Bound what we buffer for them.
    if (evbuffer_get_length(input) > host_.options().limits.max_header_bytes) {
      conn_->set_reading(false);
    }
    return;
  }
  parse_input(input);
}

void Http1ServerConnection::parse_input(evbuffer* input) {
  in_parse_ = true;
  while (!ended_ && !stream_) {
    if (evbuffer_get_length(input) == 0) break;
    evbuffer_iovec vec;
    if (evbuffer_peek(input, -1, nullptr, &vec, 1) < 1) break;
    size_t consumed = 0;
    const Fed fed =
        feed(std::string_view(static_cast<const char*>(vec.iov_base), vec.iov_len), consumed);
    // Drained before acting: failing the request may close the connection and its buffers.
    evbuffer_drain(input, consumed);
    if (!act_on(fed)) break;
  }
  in_parse_ = false;
  update_request_timer();
}

// Direct reading: the bytes of one recv(), parsed where they are. What the parser does not take
// now (a pipelined request behind the one being answered) waits in the connection's input.
void Http1ServerConnection::on_bytes(Connection& conn, std::string_view data) {
  if (ended_ || refused_ || stream_ || in_parse_) {
    conn.keep_input(data);
    return on_readable(conn.input());
  }
  in_parse_ = true;
  bool more = true;
  while (more && !ended_ && !stream_ && !data.empty()) {
    size_t consumed = 0;
    const Fed fed = feed(data, consumed);
    data.remove_prefix(consumed);
    more = act_on(fed);
  }
  in_parse_ = false;
  if (more && !ended_ && !data.empty()) {
    conn.keep_input(data);
    if (stream_) on_readable(conn.input());  // bounds what waits behind the stream
  }
  update_request_timer();
}

Http1ServerConnection::Fed Http1ServerConnection::feed(std::string_view bytes, size_t& consumed) {
  parser_.resume();
  Result<size_t> fed = parser_.feed(bytes);
  if (!fed.ok()) {
    refused_ = fed.error();
    return Fed::kFailed;
  }
  consumed = *fed;
  if (consumed > 0) first_request_ = false;
  if (refused_) return Fed::kFailed;  // a callback paused to refuse (the memory budget)
  return request_ready_ ? Fed::kReady : Fed::kMore;
}

bool Http1ServerConnection::act_on(Fed fed) {
  if (fed == Fed::kFailed) {
    fail_request(*refused_);
    return false;
  }
  if (fed == Fed::kMore) return true;
  request_ready_ = false;
  parser_.release_idle();  // while the response streams; the next request starts afresh
  conn_->set_read_timeout(0);
  update_request_timer();
  stream_ = std::make_shared<Http1ServerStream>(*this, host_.loop(), std::move(pending_),
                                                keep_alive_, std::move(charge_));
  pending_ = HttpRequest{};
  charge_ = RequestCharge(host_.options().budget);
  // The handler may finish (or reset) the stream before returning.
  host_.dispatch(stream_);
  return true;
}

void Http1ServerConnection::fail_request(const Error& error) {
  request_timer_.cancel();
  waiting_ = Waiting::kNothing;
  charge_.reset();
  std::string response;
  if (const auto& hook = host_.options().on_protocol_error) {
    HttpHeaders headers{{"Content-Type", "application/json"}};
    std::string body = protocol_error_json(error);
    hook(pending_, error, headers, body);
    write_response_head(response, error.status(), headers, BodyFraming::length(body.size()),
                        /*keep_alive=*/false);
    response.append(body);
  } else {
    write_error_response(response, error);
  }
  conn_->write(response);
  conn_->close_after_flush();
}

void Http1ServerConnection::on_drained() {
  // A local reference: the callback may finish the stream, dropping the connection's reference.
  if (std::shared_ptr<Http1ServerStream> stream = stream_) stream->notify_writable();
}

void Http1ServerConnection::on_closed(Connection::CloseReason /*reason*/,
                                      std::string_view /*message*/) {
  end();
}

bool Http1ServerConnection::on_head(Http1Head& head) {
  pending_.method = std::move(head.method);
  pending_.target = std::move(head.target);
  pending_.version_major = head.version_major;
  pending_.version_minor = head.version_minor;
  pending_.headers = std::move(head.headers);
  keep_alive_ = head.keep_alive;
  if (head.content_length && !charge_.add(static_cast<size_t>(*head.content_length))) {
    refused_ =
        Error{ErrorKind::kExhausted, "the server is holding too many request bytes; retry later"};
    return false;  // pause: parse_input answers 503
  }
  if (head.content_length) {
    // Already checked against max_body_bytes; capped anyway (0 = unlimited would trust the peer).
    constexpr uint64_t kMaxReserve = 1024 * 1024;
    pending_.body.reserve(static_cast<size_t>(std::min(*head.content_length, kMaxReserve)));
  }
  if (head.expect_continue && head.version_minor >= 1) {
    const auto& admit = host_.options().on_expect_continue;
    if (admit && !admit(pending_)) {
      // Answered without the body: the handler refuses it; the body is never read, and the
      // connection (whose input still holds it, or will) closes after the answer.
      keep_alive_ = false;
      request_ready_ = true;
      return false;  // pause: parse_input dispatches
    }
    conn_->write(kContinue);
  }
  return true;
}

bool Http1ServerConnection::on_body(std::string_view data) {
  // A declared length was charged with the head; a chunked body is charged as it arrives.
  if (pending_.body.size() + data.size() > charge_.bytes() &&
      !charge_.add(pending_.body.size() + data.size() - charge_.bytes())) {
    refused_ =
        Error{ErrorKind::kExhausted, "the server is holding too many request bytes; retry later"};
    return false;
  }
  pending_.body.append(data);
  return true;
}

bool Http1ServerConnection::on_message_complete(HttpHeaders& trailers) {
  pending_.trailers = std::move(trailers);
  request_ready_ = true;
  return false;  // pause: the next pipelined request waits for this response
}

// ---- Http1ServerStream --------------------------------------------------------------------------

Http1ServerStream::Http1ServerStream(Http1ServerConnection& conn, EventLoop& loop,
                                     HttpRequest request, bool keep_alive, RequestCharge charge)
    : conn_(&conn),
      connection_(&conn.connection()),
      keep_alive_(keep_alive),
      head_request_(request.method == "HEAD"),
      loop_(loop),
      request_(std::move(request)),
      peer_(conn.peer_address()),
      charge_(std::move(charge)) {}

std::string_view Http1ServerStream::protocol() const {
  return request_.version_minor == 0 ? "HTTP/1.0" : "HTTP/1.1";
}

bool Http1ServerStream::writable() const {
  return conn_ != nullptr && !connection_->above_high_water();
}

size_t Http1ServerStream::buffered_bytes() const {
  return conn_ != nullptr ? connection_->output_bytes() : 0;
}

bool Http1ServerStream::send_head(int status, const HttpHeaders& headers, BodyFraming framing) {
  if (conn_ == nullptr || head_sent_) return false;
  const bool http10 = request_.version_major == 1 && request_.version_minor == 0;
  if (framing.mode == BodyMode::kChunked && http10) framing = BodyFraming::until_close();
  if (framing.mode == BodyMode::kUntilClose) keep_alive_ = false;
  framing_ = framing;
  std::string head;
  write_response_head(head, status, headers, framing, keep_alive_);
  if (http10 && keep_alive_) head.insert(head.size() - 2, "Connection: keep-alive\r\n");
  conn_->connection().write(head);
  head_sent_ = true;
  return writable();
}

bool Http1ServerStream::send_body(std::string_view data) {
  if (conn_ == nullptr || !head_sent_) return false;
  if (data.empty() || head_request_) return writable();
  Connection& c = *connection_;
  switch (framing_.mode) {
    case BodyMode::kNone:
      return writable();
    case BodyMode::kContentLength: {
      const uint64_t room = framing_.content_length - body_sent_;
      if (data.size() > room) {
        // More than announced: send what fits, then end so the framing stays valid.
        c.write(data.substr(0, static_cast<size_t>(room)));
        body_sent_ += room;
        closed_ = true;
        callbacks_.suppress_close();              // the owner's own error: no on_close
        end_exchange(/*close_connection=*/true);  // last: may drop the last reference
        return false;
      }
      c.write(data);
      break;
    }
    case BodyMode::kChunked: {
      char line[24];
      const size_t line_len = format_chunk_size_line(line, data.size());
      if (data.size() <= kSmallChunkBytes) {
        // A token-sized chunk: one write (usually one send(), nothing queued) instead of three
        // appends.
        char framed[kSmallChunkBytes + sizeof(line) + 2];
        std::memcpy(framed, line, line_len);
        std::memcpy(framed + line_len, data.data(), data.size());
        std::memcpy(framed + line_len + data.size(), "\r\n", 2);
        c.write(std::string_view(framed, line_len + data.size() + 2));
      } else {
        evbuffer* out = c.output();
        evbuffer_add(out, line, line_len);
        evbuffer_add(out, data.data(), data.size());
        evbuffer_add(out, "\r\n", 2);
        c.note_written();
      }
      break;
    }
    case BodyMode::kUntilClose:
      c.write(data);
      break;
  }
  body_sent_ += data.size();
  return writable();
}

bool Http1ServerStream::finish(const HttpHeaders& trailers) {
  if (conn_ == nullptr || !head_sent_) return false;
  bool close_connection = !keep_alive_;
  if (framing_.mode == BodyMode::kChunked) {
    std::string last;
    write_last_chunk(last, trailers);
    conn_->connection().write(last);
  } else if (framing_.mode == BodyMode::kContentLength && !head_request_ &&
             body_sent_ < framing_.content_length) {
    close_connection = true;  // the client must see a truncated body, not a reused connection
  }
  finished_ = true;
  end_exchange(close_connection);  // last use of members: may drop the last reference
  return true;
}

bool Http1ServerStream::send_simple(int status, const HttpHeaders& headers, std::string_view body) {
  if (conn_ == nullptr || head_sent_) return false;
  send_head(status, headers, BodyFraming::length(body.size()));
  send_body(body);
  return finish({});
}

void Http1ServerStream::reset() {
  if (conn_ == nullptr) return;
  Http1ServerConnection* conn = conn_;
  conn_ = nullptr;
  closed_ = true;
  callbacks_.suppress_close();  // reset() never triggers on_close
  callbacks_.drop();
  conn->stream_reset();
}

void Http1ServerStream::end_exchange(bool close_connection) {
  Http1ServerConnection* conn = conn_;
  conn_ = nullptr;
  // Drop the callbacks: they may hold this stream's shared_ptr.
  callbacks_.drop();
  conn->stream_finished(close_connection);
}

void Http1ServerStream::on_writable(std::function<void()> callback) {
  if (conn_ != nullptr) callbacks_.set_writable(std::move(callback));
}

void Http1ServerStream::on_close(std::function<void()> callback) {
  if (!finished_) callbacks_.set_close(std::move(callback), closed_);
}

void Http1ServerStream::notify_writable() {
  if (conn_ != nullptr) callbacks_.run_writable([this] { return conn_ != nullptr; });
}

void Http1ServerStream::notify_closed() {
  if (conn_ == nullptr) return;
  conn_ = nullptr;
  closed_ = true;
  callbacks_.run_close();
}

}  // namespace cutline::proto
