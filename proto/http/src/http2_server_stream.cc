#include "http2_server_stream.h"

#include <cstring>

#include "http2_server_connection.h"

namespace cutline::proto {

namespace {

bool status_has_body(int status) { return status >= 200 && status != 204 && status != 304; }

}  // namespace

Http2ServerStream::Http2ServerStream(Http2ServerConnection& conn, int32_t id)
    : conn_(&conn), loop_(conn.loop()), id_(id) {}

bool Http2ServerStream::writable() {
  if (!active()) return false;
  if (buffered_bytes() > conn_->options().high_water_bytes) {
    blocked_ = true;
    return false;
  }
  return true;
}

bool Http2ServerStream::submit_head(int status, const HttpHeaders& headers, BodyFraming framing) {
  if (!active() || head_sent_) return false;
  framing_ = framing;
  head_sent_ = true;
  has_body_ = request_.method != "HEAD" && status_has_body(status) &&
              framing.mode != BodyMode::kNone &&
              !(framing.mode == BodyMode::kContentLength && framing.content_length == 0);
  complete_on_wire_ = !has_body_;
  if (!conn_->submit_response(*this, status, headers, framing, has_body_)) {
    cancel(NGHTTP2_INTERNAL_ERROR);
    return false;
  }
  return true;
}

bool Http2ServerStream::send_head(int status, const HttpHeaders& headers, BodyFraming framing) {
  if (!submit_head(status, headers, framing)) return false;
  conn_->flush();
  return writable();
}

void Http2ServerStream::append(std::string_view data) {
  // Reuse the buffer: drop what nghttp2 already took when that is at least half of it (a memmove
  // of the rest, no allocation once the buffer has its working size).
  if (out_offset_ > 0 && out_offset_ >= out_.size() / 2) {
    out_.erase(0, out_offset_);
    out_offset_ = 0;
  }
  out_.append(data);
}

void Http2ServerStream::resume() {
  if (deferred_) {
    deferred_ = false;
    conn_->resume_data(id_);
  }
}

bool Http2ServerStream::send_body(std::string_view data) {
  // A response without a body (HEAD, 204, 304) already ended with its head: like HTTP/1.1, the
  // bytes are dropped and the producer is not told to wait.
  if (complete_on_wire_ && head_sent_ && !finished_ && !closed_) return true;
  if (!active() || !head_sent_) return false;
  if (data.empty() || !has_body_) return writable();
  if (framing_.mode == BodyMode::kContentLength) {
    const uint64_t room = framing_.content_length - body_sent_;
    if (data.size() > room) {
      // More than announced: the client must not take a longer body as complete.
      cancel(NGHTTP2_INTERNAL_ERROR);
      return false;
    }
  }
  append(data);
  body_sent_ += data.size();
  resume();
  conn_->flush_soon();
  return writable();
}

bool Http2ServerStream::finish(const HttpHeaders& trailers) {
  if (!active() || !head_sent_) {
    // The response already ended on the wire with the head (no body): finishing is still valid.
    if (conn_ == nullptr && complete_on_wire_ && head_sent_ && !finished_ && !closed_) {
      finished_ = true;
      drop_callbacks();
      return true;
    }
    return false;
  }
  if (framing_.mode == BodyMode::kContentLength && has_body_ &&
      body_sent_ < framing_.content_length) {
    // Shorter than announced: reset, so the client sees a truncated response, not a short one.
    finished_ = true;
    Http2ServerConnection* conn = conn_;
    drop_callbacks();
    conn->reset_stream(id_, NGHTTP2_INTERNAL_ERROR);
    conn->flush();
    return true;
  }
  finished_ = true;
  drop_callbacks();
  if (has_body_) {
    eof_ = true;
    trailers_ = trailers;
    resume();
  }
  conn_->flush();  // may close (and detach) this stream: last use of members
  return true;
}

bool Http2ServerStream::send_simple(int status, const HttpHeaders& headers, std::string_view body) {
  if (!active() || head_sent_) return false;
  // Body first, so HEADERS and DATA leave in one flush.
  append(body);
  body_sent_ = body.size();
  if (!submit_head(status, headers, BodyFraming::length(body.size()))) return false;
  if (!has_body_) {
    out_.clear();
    out_offset_ = 0;
  }
  return finish({});
}

void Http2ServerStream::cancel(uint32_t error_code) {
  if (conn_ == nullptr || closed_) return;
  closed_ = true;
  callbacks_.suppress_close();  // the owner's own end: no on_close
  drop_callbacks();
  Http2ServerConnection* conn = conn_;
  conn->reset_stream(id_, error_code);
  conn->flush();
}

void Http2ServerStream::reset() {
  if (!active()) return;
  cancel(NGHTTP2_CANCEL);
}

void Http2ServerStream::drop_callbacks() { callbacks_.drop(); }

void Http2ServerStream::on_writable(std::function<void()> callback) {
  if (active()) callbacks_.set_writable(std::move(callback));
}

void Http2ServerStream::on_close(std::function<void()> callback) {
  if (!finished_) callbacks_.set_close(std::move(callback), closed_);
}

ssize_t Http2ServerStream::read_body(uint8_t* buf, size_t length, uint32_t* data_flags) {
  const size_t n = std::min(length, buffered_bytes());
  if (n > 0) {
    std::memcpy(buf, out_.data() + out_offset_, n);
    out_offset_ += n;
    if (out_offset_ == out_.size()) {
      out_.clear();
      out_offset_ = 0;
    }
    if (blocked_ && conn_ != nullptr && buffered_bytes() <= conn_->options().low_water_bytes) {
      blocked_ = false;
      conn_->queue_writable(*this);
    }
  }
  if (buffered_bytes() == 0) {
    if (eof_) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
      if (!trailers_.empty() && conn_ != nullptr) {
        *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        conn_->submit_trailers(id_, trailers_);
      }
    } else if (n == 0) {
      deferred_ = true;
      return NGHTTP2_ERR_DEFERRED;
    }
  }
  return static_cast<ssize_t>(n);
}

void Http2ServerStream::notify_writable() {
  if (active()) callbacks_.run_writable([this] { return active(); });
}

void Http2ServerStream::notify_closed() {
  if (conn_ == nullptr) return;
  conn_ = nullptr;
  if (finished_ || closed_) return;
  if (complete_on_wire_ && head_sent_) return;  // the response ended with its head; finish() ok
  closed_ = true;
  callbacks_.run_close();
}

}  // namespace cutline::proto
