// Http2Exchange: one request on an HTTP/2 upstream connection, as the caller's ClientHandle sees
// it (http2_client_connection.h): the callback contract of http_client.h, pause/resume holding
// that stream's data, cancel resetting only that stream.
#include "http2_client_connection.h"

#include "cutline/proto/net/event_loop.h"

namespace cutline::proto {

Http2Exchange::Http2Exchange(HttpClient::Http2Pool& pool, ClientRequest request,
                             ClientCallbacks callbacks)
    : pool_(&pool), request_(std::move(request)), callbacks_(std::move(callbacks)) {
  pool_->active.insert(this);
}

void Http2Exchange::finish_state() {
  state_ = State::kDone;
  if (pool_ != nullptr) pool_->active.erase(this);
  pool_ = nullptr;
  connection = nullptr;
  std::string().swap(held_);
}

void Http2Exchange::after_callback() {
  if (--in_callback_ == 0 && state_ == State::kDone) callbacks_ = ClientCallbacks{};
}

void Http2Exchange::cancel() {
  if (fallback.active()) fallback.cancel();
  if (state_ == State::kDone) return;
  Http2ClientConnection* conn = connection;
  finish_state();
  if (in_callback_ == 0) callbacks_ = ClientCallbacks{};
  if (conn != nullptr) conn->cancel_stream(this);
}

void Http2Exchange::abandon() {
  if (state_ == State::kDone) return;
  finish_state();
  if (in_callback_ == 0) callbacks_ = ClientCallbacks{};
}

void Http2Exchange::pause() {
  if (fallback.active()) fallback.pause();
  paused_ = true;
}

void Http2Exchange::resume() {
  if (fallback.active()) fallback.resume();
  if (state_ == State::kDone || !paused_) return;
  paused_ = false;
  if ((held_.empty() && !ended_) || flush_posted_ || pool_ == nullptr) return;
  // Never inline: the caller may be inside one of this exchange's callbacks.
  flush_posted_ = true;
  pool_->loop.post([weak = weak_from_this()] {
    if (auto self = weak.lock()) self->flush_held();
  });
}

void Http2Exchange::flush_held() {
  flush_posted_ = false;
  if (state_ == State::kDone || paused_) return;
  if (!held_.empty()) {
    std::string data = std::move(held_);
    held_.clear();
    const size_t bytes = data.size();
    Http2ClientConnection* conn = connection;
    const int32_t id = stream_id;
    if (callbacks_.on_body) {
      ++in_callback_;
      callbacks_.on_body(data);
      after_callback();
    }
    if (conn != nullptr) conn->consumed(id, bytes);
    if (state_ == State::kDone || paused_) return;
  }
  if (ended_) complete_now();
}

void Http2Exchange::deliver_head(int status, HttpHeaders& headers) {
  if (state_ == State::kDone) return;
  head_delivered_ = true;
  std::string().swap(request_.body);  // cannot be retried any more
  if (!callbacks_.on_head) return;
  ++in_callback_;
  callbacks_.on_head(status, headers);
  after_callback();
}

void Http2Exchange::deliver_body(std::string_view data) {
  if (state_ == State::kDone || data.empty()) return;
  if (paused_ || !held_.empty()) {
    held_.append(data);
    return;
  }
  Http2ClientConnection* conn = connection;
  const int32_t id = stream_id;
  if (callbacks_.on_body) {
    ++in_callback_;
    callbacks_.on_body(data);
    after_callback();
  }
  if (conn != nullptr) conn->consumed(id, data.size());
}

void Http2Exchange::end_stream(HttpHeaders& trailers) {
  if (state_ == State::kDone) return;
  ended_ = true;
  trailers_ = std::move(trailers);
  connection = nullptr;  // the stream is closed; held bytes need no WINDOW_UPDATE
  if (paused_ || !held_.empty()) return;
  complete_now();
}

void Http2Exchange::complete_now() {
  auto on_complete = std::move(callbacks_.on_complete);
  HttpHeaders trailers = std::move(trailers_);
  finish_state();
  if (in_callback_ == 0) callbacks_ = ClientCallbacks{};
  if (on_complete) on_complete(trailers);
}

void Http2Exchange::fail(const ClientError& error) {
  if (state_ == State::kDone) return;
  auto on_error = std::move(callbacks_.on_error);
  finish_state();
  if (in_callback_ == 0) callbacks_ = ClientCallbacks{};
  if (on_error) on_error(error);
}

}  // namespace cutline::proto
