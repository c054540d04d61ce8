#include "cutline/proto/net/event_loop.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cassert>
#include <cstdint>
#include <cstdlib>

namespace cutline::proto {

namespace {

// libevent must be told once, before any base exists, to use pthread locks (post() and stop()
// touch a base from other threads).
void use_pthreads_once() {
  static const bool kDone = [] {
    evthread_use_pthreads();
    return true;
  }();
  (void)kDone;
}

}  // namespace

EventLoop::EventLoop(int index) : index_(index) {
  use_pthreads_once();
  event_config* config = event_config_new();
  // Timers use the monotonic clock; no need for the precise-timer flag's extra cost.
  base_ = event_base_new_with_config(config);
  event_config_free(config);
  if (base_ == nullptr) std::abort();  // out of descriptors at startup: nothing sensible to do
  wakeup_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeup_fd_ < 0) std::abort();
  wakeup_event_ = event_new(base_, wakeup_fd_, EV_READ | EV_PERSIST, &EventLoop::on_wakeup, this);
  event_add(wakeup_event_, nullptr);
  self_post_event_ = event_new(base_, -1, 0, &EventLoop::on_self_post, this);
}

EventLoop::~EventLoop() {
  event_free(self_post_event_);
  event_free(wakeup_event_);
  close(wakeup_fd_);
  event_base_free(base_);
}

void EventLoop::run() {
  loop_thread_.store(std::this_thread::get_id());
  if (!stop_requested_.load()) {
    // Run anything posted before run() started.
    drain_posted();
    if (!stop_requested_.load()) event_base_dispatch(base_);
  }
  loop_thread_.store(std::thread::id());
  stop_requested_.store(false);
}

void EventLoop::stop() {
  stop_requested_.store(true);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wakeup_fd_, &one, sizeof(one));
}

void EventLoop::post(std::function<void()> fn) {
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    was_empty = posted_.empty();
    posted_.push_back(std::move(fn));
  }
  if (!was_empty) return;  // whoever made the queue non-empty woke the loop
  if (in_loop_thread()) {
    event_active(self_post_event_, EV_READ, 1);
    return;
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wakeup_fd_, &one, sizeof(one));
}

bool EventLoop::in_loop_thread() const { return loop_thread_.load() == std::this_thread::get_id(); }

void EventLoop::on_wakeup(int fd, short /*what*/, void* arg) {
  auto* self = static_cast<EventLoop*>(arg);
  uint64_t value;
  [[maybe_unused]] ssize_t n = read(fd, &value, sizeof(value));
  self->drain_posted();
  if (self->stop_requested_.load()) event_base_loopbreak(self->base_);
}

void EventLoop::on_self_post(int /*fd*/, short /*what*/, void* arg) {
  auto* self = static_cast<EventLoop*>(arg);
  self->drain_posted();
  if (self->stop_requested_.load()) event_base_loopbreak(self->base_);
}

void EventLoop::drain_posted() {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) fn();
}

}  // namespace cutline::proto
