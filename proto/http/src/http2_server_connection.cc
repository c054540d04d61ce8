#include "http2_server_connection.h"

#include <event2/buffer.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>

#include "cutline/proto/http1/http1_writer.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::proto {

namespace {

std::string_view as_view(const uint8_t* data, size_t len) {
  return std::string_view(reinterpret_cast<const char*>(data), len);
}

// Connection-specific fields are not allowed in HTTP/2 (RFC 9113 8.2.2); framing is the
// stream's own.
bool skipped_response_header(std::string_view name) {
  auto is = [name](std::string_view other) {
    return name.size() == other.size() &&
           std::equal(name.begin(), name.end(), other.begin(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) == b;
           });
  };
  return is("connection") || is("keep-alive") || is("proxy-connection") ||
         is("transfer-encoding") || is("upgrade") || is("content-length") || is("te");
}

nghttp2_nv make_nv(const char* name, size_t name_len, const char* value, size_t value_len) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value)), name_len, value_len,
                    NGHTTP2_NV_FLAG_NONE};
}

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct CallbacksDeleter {
  void operator()(nghttp2_session_callbacks* c) const { nghttp2_session_callbacks_del(c); }
};

}  // namespace

Http2ServerConnection::Http2ServerConnection(ServerConnectionHost& host,
                                             std::unique_ptr<Connection> conn,
                                             std::shared_ptr<const TlsContext> tls)
    : host_(host), conn_(std::move(conn)), request_timer_(host.loop(), [this] { on_deadline(); }) {
  tls_ = std::move(tls);
  reset_tokens_ = 2.0 * host_.options().http2_max_resets_per_s;
  reset_refill_ms_ = steady_ms();
  conn_->set_handler(*this);
  peer_ = conn_->peer_address();

  nghttp2_session_callbacks* raw_callbacks = nullptr;
  nghttp2_session_callbacks_new(&raw_callbacks);
  std::unique_ptr<nghttp2_session_callbacks, CallbacksDeleter> callbacks(raw_callbacks);
  nghttp2_session_callbacks_set_on_begin_headers_callback(raw_callbacks, &on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(raw_callbacks, &on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(raw_callbacks, &on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(raw_callbacks, &on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(raw_callbacks, &on_stream_close);
  nghttp2_session_server_new(&session_, raw_callbacks, this);

  const ServerOptions& o = host_.options();
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, o.http2_max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, o.http2_initial_window_bytes},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  // The connection-level receive window: room for every stream's initial window, bounded.
  const int32_t connection_window = static_cast<int32_t>(
      std::min<uint64_t>(static_cast<uint64_t>(o.http2_initial_window_bytes) * 16, (1u << 31) - 1));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, connection_window);
  if (host_.draining()) drain();
  update_idle_timer();
}

Http2ServerConnection::~Http2ServerConnection() {
  if (flush_event_ != nullptr) event_free(flush_event_);
  end_streams();
  conn_.reset();
  nghttp2_session_del(session_);
}

// ---- Connection events
// ----------------------------------------------------------------------------

void Http2ServerConnection::on_readable(evbuffer* input) {
  if (ended_) return;
  in_recv_ = true;
  bool failed = false;
  while (evbuffer_get_length(input) > 0) {
    evbuffer_iovec vec;
    if (evbuffer_peek(input, -1, nullptr, &vec, 1) < 1) break;
    const ssize_t consumed =
        nghttp2_session_mem_recv(session_, static_cast<const uint8_t*>(vec.iov_base), vec.iov_len);
    if (consumed < 0) {
      failed = true;  // nghttp2 queued a GOAWAY where the protocol allows one
      break;
    }
    evbuffer_drain(input, static_cast<size_t>(consumed));
    if (too_many_resets_) break;
  }
  in_recv_ = false;
  if (failed || too_many_resets_) evbuffer_drain(input, evbuffer_get_length(input));
  if (too_many_resets_ && !terminating_) {
    if (const auto& hook = host_.options().on_refused) hook("http2_resets");
    terminate(NGHTTP2_ENHANCE_YOUR_CALM);
    return;
  }
  run_events();
  schedule_deadline();
  flush();
  if (failed && !ended_) {
    // A fatal protocol error: say GOAWAY (flushed above), then close.
    end_streams();
    conn_->close_after_flush();
  }
}

void Http2ServerConnection::on_drained() { flush(); }

void Http2ServerConnection::on_closed(Connection::CloseReason /*reason*/,
                                      std::string_view /*message*/) {
  end();
}

void Http2ServerConnection::shutdown() {
  if (ended_) return;
  ended_ = true;
  request_timer_.cancel();
  conn_->close();
  end_streams();
}

void Http2ServerConnection::end() {
  if (ended_) return;
  ended_ = true;
  request_timer_.cancel();
  conn_->close();
  end_streams();
  host_.retire(this);
}

void Http2ServerConnection::end_streams() {
  auto open = std::move(streams_);
  streams_.clear();
  for (auto& [id, s] : open) {
    s->notify_closed();
    s->detach();
  }
  // Streams nghttp2 closed whose event has not run yet: they must not keep a pointer to us.
  auto pending = std::move(events_);
  events_.clear();
  for (Event& event : pending) {
    if (!event.stream) continue;
    event.stream->notify_closed();
    event.stream->detach();
  }
  writable_.clear();
}

size_t Http2ServerConnection::unsent_bytes() const {
  if (ended_) return 0;
  size_t n = conn_->output_bytes();
  for (const auto& [id, s] : streams_) n += s->buffered_bytes();
  // Frames nghttp2 still has to produce (a trailer, an END_STREAM) count as one byte.
  if (nghttp2_session_want_write(session_) != 0) ++n;
  return n;
}

void Http2ServerConnection::drain() {
  if (goaway_sent_ || ended_) return;
  goaway_sent_ = true;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  flush();
}

void Http2ServerConnection::terminate(uint32_t error_code) {
  if (ended_ || terminating_) return;
  terminating_ = true;
  request_timer_.cancel();
  nghttp2_session_terminate_session(session_, error_code);
  goaway_sent_ = true;
  flush();
  if (ended_) return;
  end_streams();
  conn_->close_after_flush();  // ends with on_closed(kFlushed) -> end()
}

bool Http2ServerConnection::take_reset() {
  const uint32_t rate = host_.options().http2_max_resets_per_s;
  if (rate == 0) return true;
  const int64_t now = steady_ms();
  reset_tokens_ = std::min(2.0 * rate, reset_tokens_ + (now - reset_refill_ms_) * rate / 1000.0);
  reset_refill_ms_ = now;
  if (reset_tokens_ < 1.0) return false;
  reset_tokens_ -= 1.0;
  return true;
}

void Http2ServerConnection::uncount(Http2ServerStream& stream) {
  buffered_request_bytes_ -= std::min(buffered_request_bytes_, stream.buffered_counted);
  stream.buffered_counted = 0;
}

void Http2ServerConnection::schedule_deadline() {
  if (ended_ || terminating_) return;
  int64_t earliest = 0;
  for (const auto& [id, s] : streams_) {
    if (s->rejected || s->dispatched() || s->deadline_ms == 0) continue;
    if (earliest == 0 || s->deadline_ms < earliest) earliest = s->deadline_ms;
  }
  if (earliest == 0) {
    if (timer_at_ms_ != 0) request_timer_.cancel();
    timer_at_ms_ = 0;
    return;
  }
  if (earliest == timer_at_ms_) return;
  timer_at_ms_ = earliest;
  request_timer_.arm(std::max<int64_t>(0, earliest - steady_ms()));
}

void Http2ServerConnection::on_deadline() {
  timer_at_ms_ = 0;
  if (ended_ || terminating_) return;
  const int64_t now = steady_ms();
  const ServerOptions& o = host_.options();
  std::vector<Http2ServerStream*> late;
  for (const auto& [id, s] : streams_) {
    if (s->rejected || s->dispatched() || s->deadline_ms == 0 || s->deadline_ms > now) continue;
    if (!s->headers_done) {
      // The connection is inside this stream's header block: nothing else can arrive on it.
      terminate(NGHTTP2_ENHANCE_YOUR_CALM);
      return;
    }
    late.push_back(s.get());
  }
  for (Http2ServerStream* s : late) {
    reject(*s, Error{ErrorKind::kRequestTimeout, "request body not complete within " +
                                                     std::to_string(o.request_body_timeout_ms) +
                                                     " ms"});
  }
  run_events();
  flush();
  schedule_deadline();
}

void Http2ServerConnection::update_idle_timer() {
  const bool idle = streams_.empty();
  if (idle == idle_armed_ || ended_) return;
  idle_armed_ = idle;
  conn_->set_read_timeout(idle ? host_.options().idle_timeout_ms : 0);
}

void Http2ServerConnection::close_if_done() {
  if (ended_ || !conn_->open()) return;
  const bool session_done =
      nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0;
  if (session_done || (goaway_sent_ && streams_.empty())) {
    end_streams();
    conn_->close_after_flush();  // ends with on_closed(kFlushed) -> end()
  }
}

// ---- Output
// ---------------------------------------------------------------------------------------

void Http2ServerConnection::flush_soon() {
  if (flush_scheduled_ || ended_) return;
  if (flush_event_ == nullptr) {
    flush_event_ = event_new(loop().base(), -1, 0, &Http2ServerConnection::on_flush_soon, this);
    if (flush_event_ == nullptr) return flush();
  }
  flush_scheduled_ = true;
  event_active(flush_event_, 0, 0);
}

void Http2ServerConnection::on_flush_soon(evutil_socket_t, short, void* self) {
  auto* conn = static_cast<Http2ServerConnection*>(self);
  if (conn->flush_scheduled_) conn->flush();
}

void Http2ServerConnection::flush() {
  if (in_recv_ || in_flush_ || ended_ || !conn_->open()) return;
  in_flush_ = true;
  flush_scheduled_ = false;
  bool failed = false;
  // nghttp2 hands out a frame or a few at a time: gather them and write once. The scratch
  // buffer is per thread and keeps its capacity (no allocation per flush once warm).
  thread_local std::string out;
  out.clear();
  const size_t room = host_.options().high_water_bytes;
  while (conn_->output_bytes() + out.size() < room) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      failed = true;
      break;
    }
    if (n == 0) break;
    out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  if (!out.empty()) conn_->write(out);
  in_flush_ = false;
  if (failed) {
    end();
    return;
  }
  run_events();  // streams nghttp2 closed while sending (responses complete, resets sent)
  // on_writable callbacks, outside the send loop (they may send more).
  while (!writable_.empty() && !ended_) {
    std::shared_ptr<Http2ServerStream> s = std::move(writable_.back());
    writable_.pop_back();
    s->notify_writable();
  }
  update_idle_timer();
  close_if_done();
}

void Http2ServerConnection::queue_writable(Http2ServerStream& stream) {
  if (auto it = streams_.find(stream.id()); it != streams_.end()) writable_.push_back(it->second);
}

bool Http2ServerConnection::submit_response(Http2ServerStream& stream, int status,
                                            const HttpHeaders& headers, BodyFraming framing,
                                            bool has_body) {
  // Lower-cased names in one buffer (reserved first so the pointers stay valid), then the array.
  char status_text[4];
  std::to_chars(status_text, status_text + sizeof(status_text), std::clamp(status, 100, 999));
  char length_text[24];
  size_t length_len = 0;
  if (framing.mode == BodyMode::kContentLength) {
    length_len = static_cast<size_t>(
        std::to_chars(length_text, length_text + sizeof(length_text), framing.content_length).ptr -
        length_text);
  }
  size_t names = 0;
  for (const auto& h : headers) names += h.name.size();
  header_names_.clear();
  header_names_.reserve(names);
  nva_.clear();
  nva_.push_back(make_nv(":status", 7, status_text, 3));
  if (length_len > 0) nva_.push_back(make_nv("content-length", 14, length_text, length_len));
  for (const auto& h : headers) {
    if (skipped_response_header(h.name)) continue;
    const size_t at = header_names_.size();
    for (char c : h.name)
      header_names_.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    nva_.push_back(
        make_nv(header_names_.data() + at, h.name.size(), h.value.data(), h.value.size()));
  }
  nghttp2_data_provider provider;
  provider.source.ptr = &stream;
  provider.read_callback = &Http2ServerConnection::read_body;
  return nghttp2_submit_response(session_, stream.id(), nva_.data(), nva_.size(),
                                 has_body ? &provider : nullptr) == 0;
}

void Http2ServerConnection::submit_trailers(int32_t stream_id, const HttpHeaders& trailers) {
  size_t names = 0;
  for (const auto& h : trailers) names += h.name.size();
  header_names_.clear();
  header_names_.reserve(names);
  nva_.clear();
  for (const auto& h : trailers) {
    if (skipped_response_header(h.name)) continue;
    const size_t at = header_names_.size();
    for (char c : h.name)
      header_names_.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    nva_.push_back(
        make_nv(header_names_.data() + at, h.name.size(), h.value.data(), h.value.size()));
  }
  nghttp2_submit_trailer(session_, stream_id, nva_.data(), nva_.size());
}

void Http2ServerConnection::resume_data(int32_t stream_id) {
  nghttp2_session_resume_data(session_, stream_id);
}

void Http2ServerConnection::reset_stream(int32_t stream_id, uint32_t error_code) {
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, error_code);
}

ssize_t Http2ServerConnection::read_body(nghttp2_session* /*session*/, int32_t /*stream_id*/,
                                         uint8_t* buf, size_t length, uint32_t* data_flags,
                                         nghttp2_data_source* source, void* /*self*/) {
  return static_cast<Http2ServerStream*>(source->ptr)->read_body(buf, length, data_flags);
}

// ---- Requests
// -------------------------------------------------------------------------------------

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
    s->deadline_ms = steady_ms() + ms;
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
    s.deadline_ms =
        !end_stream && o.request_body_timeout_ms > 0 ? steady_ms() + o.request_body_timeout_ms : 0;
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
