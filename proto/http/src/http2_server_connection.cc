#include "http2_server_connection.h"

#include <event2/buffer.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "cutline/proto/http1/http1_writer.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::proto {

namespace {

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
  reset_refill_ms_ = clock_.now_ms();
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
  const int64_t now = clock_.now_ms();
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
  request_timer_.arm(std::max<int64_t>(0, earliest - clock_.now_ms()));
}

void Http2ServerConnection::on_deadline() {
  timer_at_ms_ = 0;
  if (ended_ || terminating_) return;
  const int64_t now = clock_.now_ms();
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

}  // namespace cutline::proto
