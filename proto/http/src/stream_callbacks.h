#pragma once
// Internal to proto/: the callback half of the ServerStream contract (server_stream.h), shared by
// the HTTP/1.1 and HTTP/2 streams so that both keep it the same way:
//   - on_close runs at most once, when the exchange ends before the response completed; one
//     registered after the stream closed runs at once (unless one already ran);
//   - the owner's own end (reset(), an over-long body) never runs it;
//   - on_writable stays registered across calls unless its callback replaced it or the exchange
//     ended meanwhile;
//   - both are dropped when the exchange ends (they may hold the stream's shared_ptr).
// The stream keeps its own state (closed, finished, its connection) and says when to act.

#include <functional>
#include <utility>

namespace cutline::proto {

class StreamCallbacks {
 public:
  void set_writable(std::function<void()> callback) { on_writable_ = std::move(callback); }

  // ServerStream::on_close for a stream that is not finished: runs `callback` now when the
  // stream is already `closed` (once), else keeps it.
  void set_close(std::function<void()> callback, bool closed) {
    if (!closed) {
      on_close_ = std::move(callback);
    } else if (!close_notified_ && callback) {
      close_notified_ = true;
      callback();
    }
  }

  // Runs on_writable; `still_active()` says afterwards whether the exchange goes on (then the
  // callback stays registered unless it registered another).
  template <typename StillActive>
  void run_writable(StillActive still_active) {
    if (!on_writable_) return;
    auto callback = std::move(on_writable_);
    callback();
    if (still_active() && !on_writable_) on_writable_ = std::move(callback);
  }

  // The exchange ended before the response completed: on_close runs (once), both are dropped.
  void run_close() {
    on_writable_ = nullptr;
    auto callback = std::move(on_close_);
    on_close_ = nullptr;
    if (callback) {
      close_notified_ = true;
      callback();
    }
  }

  // The owner ended the exchange itself: no on_close now or later.
  void suppress_close() { close_notified_ = true; }

  void drop() {
    on_writable_ = nullptr;
    on_close_ = nullptr;
  }

  bool has_writable() const { return static_cast<bool>(on_writable_); }

 private:
  bool close_notified_ = false;
  std::function<void()> on_writable_;
  std::function<void()> on_close_;
};

}  // namespace cutline::proto
