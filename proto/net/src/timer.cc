#include "cutline/proto/net/timer.h"

#include <event2/event.h>

#include "cutline/proto/net/connection.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::proto {

namespace {

timeval to_timeval(int64_t ms) {
  if (ms < 0) ms = 0;
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

}  // namespace

Timer::Timer(EventLoop& loop, std::function<void()> on_fire)
    : on_fire_(std::move(on_fire)), loop_(loop) {}

Timer::~Timer() {
  if (event_ != nullptr) event_free(event_);
}

void Timer::arm(int64_t delay_ms) {
  if (event_ == nullptr) {
    event_ = event_new(loop_.base(), -1, 0, &Timer::on_event, this);
  } else if (periodic_) {
    event_del(event_);
    event_assign(event_, loop_.base(), -1, 0, &Timer::on_event, this);
    periodic_ = false;
  }
  const timeval tv = to_timeval(delay_ms);
  event_add(event_, &tv);
}

void Timer::arm_periodic(int64_t period_ms) {
  if (event_ == nullptr) {
    event_ = event_new(loop_.base(), -1, EV_PERSIST, &Timer::on_event, this);
  } else {
    event_del(event_);
  }
  event_assign(event_, loop_.base(), -1, EV_PERSIST, &Timer::on_event, this);
  periodic_ = true;
  const timeval tv = to_timeval(period_ms > 0 ? period_ms : 1);
  event_add(event_, &tv);
}

void Timer::cancel() {
  if (event_ != nullptr) event_del(event_);
}

void Timer::release() {
  if (event_ == nullptr) return;
  event_free(event_);
  event_ = nullptr;
  periodic_ = false;
}

bool Timer::armed() const {
  return event_ != nullptr && event_pending(event_, EV_TIMEOUT, nullptr) != 0;
}

void Timer::on_event(int /*fd*/, short /*what*/, void* arg) {
  auto* self = static_cast<Timer*>(arg);
  WriteBatch batch;  // what a cut writes (last chunk, terminating chunk) leaves in one send
  // A copy: the callback may destroy the Timer (and with it on_fire_) while it runs.
  std::function<void()> fn = self->on_fire_;
  fn();
}

}  // namespace cutline::proto
