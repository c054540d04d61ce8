// Http2ServerConnection, the request side: nghttp2's callbacks as a request's frames arrive
// (headers, body data, end of stream, resets), the checks that reject a request before any
// handler sees it, and the events that hand requests to the server (http2_server_connection.cc
// has the connection's lifetime, deadlines and the response side).
#include "http2_server_connection.h"

#include <algorithm>
#include <charconv>

#include "cutline/proto/http1/http1_writer.h"

namespace cutline::proto {

namespace {

std::string_view as_view(const uint8_t* data, size_t len) {
  return std::string_view(reinterpret_cast<const char*>(data), len);
}

}  // namespace

Http2ServerStream* Http2ServerConnection::stream(int32_t stream_id) {
  auto it = streams_.find(stream_id);
  return it != streams_.end() ? it->second.get() : nullptr;
}

int Http2ServerConnection::on_begin_headers(nghttp2_session* /*session*/,
                                            const nghttp2_frame* frame, void* arg) {
  auto* self = static_cast<Http2ServerConnection*>(arg);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto s = std::make_shared<Http2ServerStream>(*self, frame->hd.stream_id);
  s->set_peer(self->peer_);
  s->charge = RequestCharge(self->host_.options().budget);
  if (const int64_t ms = self->host_.options().request_header_timeout_ms; ms > 0) {
    s->deadline_ms = self->clock_.now_ms() + ms;
  }
  s->request().version_major = 2;
  s->request().version_minor = 0;
  self->streams_.emplace(frame->hd.stream_id, std::move(s));
  return 0;
}

int Http2ServerConnection::on_header(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                                     const uint8_t* name, size_t name_len, const uint8_t* value,
                                     size_t value_len, uint8_t /*flags*/, void* arg) {
  auto* self = static_cast<Http2ServerConnection*>(arg);
  Http2ServerStream* s = self->stream(frame->hd.stream_id);
  if (s == nullptr || s->rejected || frame->hd.type != NGHTTP2_HEADERS) return 0;
  const std::string_view n = as_view(name, name_len);
  const std::string_view v = as_view(value, value_len);
  const Http1Limits& limits = self->host_.options().limits;
  s->request_header_bytes += name_len + value_len;
  HttpRequest& r = s->request();
  const bool trailers = frame->headers.cat != NGHTTP2_HCAT_REQUEST;
  if (s->request_header_bytes > limits.max_header_bytes ||
      (trailers ? r.trailers.size() : r.headers.size()) >= limits.max_header_count) {
    self->reject(*s, Error{ErrorKind::kHeadersTooLarge, "request header fields too large"});
    return 0;
  }
  if (trailers) {
    r.trailers.add(n, v);
  } else if (n == ":method") {
    r.method.assign(v);
  } else if (n == ":path") {
    r.target.assign(v);
  } else if (n == ":authority") {
    if (!r.headers.has("host")) r.headers.add("Host", v);
  } else if (!n.empty() && n.front() != ':') {
    r.headers.add(n, v);
  }
  return 0;
}

int Http2ServerConnection::on_data_chunk(nghttp2_session* /*session*/, uint8_t /*flags*/,
                                         int32_t stream_id, const uint8_t* data, size_t len,
                                         void* arg) {
  auto* self = static_cast<Http2ServerConnection*>(arg);
  Http2ServerStream* s = self->stream(stream_id);
  if (s == nullptr || s->rejected) return 0;
  std::string& body = s->request().body;
  const ServerOptions& o = self->host_.options();
  const size_t max_body = o.limits.max_body_bytes;
  if (max_body > 0 && body.size() + len > max_body) {
    self->reject(*s, Error{ErrorKind::kTooLarge,
                           "request body larger than " + std::to_string(max_body) + " bytes"});
    return 0;
  }
  if (o.http2_max_buffered_request_bytes > 0 &&
      self->buffered_request_bytes_ + len > o.http2_max_buffered_request_bytes) {
    self->reject(*s, Error{ErrorKind::kExhausted,
                           "this connection holds too many unfinished request bytes; retry later"});
    return 0;
  }
  // A declared Content-Length was charged with the head; otherwise the body as it arrives.
  if (body.size() + len > s->charge.bytes() &&
      !s->charge.add(body.size() + len - s->charge.bytes())) {
    self->reject(*s, Error{ErrorKind::kExhausted,
                           "the server is holding too many request bytes; retry later"});
    return 0;
  }
  self->buffered_request_bytes_ += len;
  s->buffered_counted += len;
  body.append(reinterpret_cast<const char*>(data), len);
  return 0;
}

int Http2ServerConnection::on_frame_recv(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                                         void* arg) {
  auto* self = static_cast<Http2ServerConnection*>(arg);
  if (frame->hd.type == NGHTTP2_RST_STREAM) {
    if (!self->take_reset()) self->too_many_resets_ = true;
    return 0;
  }
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  auto it = self->streams_.find(frame->hd.stream_id);
  if (it == self->streams_.end() || it->second->rejected || it->second->dispatched()) return 0;
  Http2ServerStream& s = *it->second;
  const ServerOptions& o = self->host_.options();
  const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    s.headers_done = true;
    s.deadline_ms = !end_stream && o.request_body_timeout_ms > 0
                        ? self->clock_.now_ms() + o.request_body_timeout_ms
                        : 0;
    if (!end_stream && o.http2_max_unfinished_streams > 0) {
      uint32_t unfinished = 0;
      for (const auto& [id, other] : self->streams_) {
        if (other->headers_done && !other->rejected && !other->dispatched()) ++unfinished;
      }
      if (unfinished > o.http2_max_unfinished_streams) {
        self->reject(s, Error{ErrorKind::kExhausted,
                              "too many unfinished requests on this connection; retry later"});
        return 0;
      }
    }
    // A declared body over the limit is refused before it is sent.
    const size_t max_body = o.limits.max_body_bytes;
    if (auto length = s.request().headers.get("content-length"); length && max_body > 0) {
      uint64_t n = 0;
      const auto [ptr, ec] = std::from_chars(length->data(), length->data() + length->size(), n);
      if (ec == std::errc() && n > max_body) {
        self->reject(s, Error{ErrorKind::kTooLarge,
                              "request body larger than " + std::to_string(max_body) + " bytes"});
        return 0;
      }
      if (ec == std::errc() && !s.charge.add(static_cast<size_t>(n))) {
        self->reject(s, Error{ErrorKind::kExhausted,
                              "the server is holding too many request bytes; retry later"});
        return 0;
      }
      s.request().body.reserve(static_cast<size_t>(std::min<uint64_t>(n, 1024 * 1024)));
    }
  }
  if (end_stream) {
    self->uncount(s);
    s.deadline_ms = 0;
    s.mark_dispatched();
    self->events_.push_back(Event{EventKind::kRequest, it->second, Error{}});
  }
  return 0;
}

int Http2ServerConnection::on_stream_close(nghttp2_session* /*session*/, int32_t stream_id,
                                           uint32_t /*error_code*/, void* arg) {
  auto* self = static_cast<Http2ServerConnection*>(arg);
  auto it = self->streams_.find(stream_id);
  if (it == self->streams_.end()) return 0;
  self->uncount(*it->second);
  self->events_.push_back(Event{EventKind::kClosed, std::move(it->second), Error{}});
  self->streams_.erase(it);
  return 0;
}

void Http2ServerConnection::reject(Http2ServerStream& stream, const Error& error) {
  if (stream.rejected) return;
  stream.rejected = true;
  stream.deadline_ms = 0;
  uncount(stream);
  auto it = streams_.find(stream.id());
  if (it == streams_.end()) return;
  events_.push_back(Event{EventKind::kReject, it->second, error});
}

void Http2ServerConnection::answer_error(Http2ServerStream& stream, const Error& error) {
  HttpHeaders headers{{"Content-Type", "application/json"}};
  std::string body = protocol_error_json(error);
  if (const auto& hook = host_.options().on_protocol_error) {
    hook(stream.request(), error, headers, body);
  }
  stream.send_simple(error.status(), headers, body);
}

void Http2ServerConnection::run_events() {
  // The handler may send (flush -> mem_send -> stream closes append events): the outer call
  // runs those too, by index, so a nested call has nothing to do.
  if (in_events_) return;
  in_events_ = true;
  for (size_t i = 0; i < events_.size() && !ended_; ++i) {
    Event event = std::move(events_[i]);
    switch (event.kind) {
      case EventKind::kRequest: {
        // A stream the client reset (or a connection past its reset rate) before the handler got
        // it costs no work: nothing is authenticated, parsed, admitted or sent upstream for it.
        auto open = streams_.find(event.stream->id());
        if (terminating_ || too_many_resets_ || open == streams_.end() ||
            open->second != event.stream) {
          break;
        }
        host_.dispatch(std::move(event.stream));
        break;
      }
      case EventKind::kReject: {
        const int32_t id = event.stream->id();
        if (streams_.count(id) == 0) break;
        answer_error(*event.stream, event.error);
        // Refused while the client still sends its body: once the answer is out, ask it to stop
        // (RST_STREAM NO_ERROR, RFC 9113 8.1) so the stream ends instead of lingering half-open.
        flush();
        if (!ended_ && streams_.count(id) != 0 && event.stream->buffered_bytes() == 0 &&
            nghttp2_session_get_stream_remote_close(session_, id) == 0) {
          nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR);
        }
        break;
      }
      case EventKind::kClosed:
        event.stream->notify_closed();
        event.stream->detach();
        break;
    }
  }
  events_.clear();
  in_events_ = false;
}

}  // namespace cutline::proto
