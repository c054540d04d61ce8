#pragma once
// Timer: a one-shot or periodic callback on an EventLoop (a libevent timer event). The gateway
// gives every stream one named Timer per timeout (deadline, ttft, idle, queue).
//
// Time: libevent waits in real (monotonic) time; the injected Clock is for measuring. A timer
// that fires means "look at the clock now", not "exactly N ms have passed".
//
// Threading and lifetime: construct, arm, cancel and destroy on the loop's thread (or before
// the loop runs). The callback runs on the loop thread. The callback may arm(), cancel() or
// destroy its own Timer. Destroying a Timer cancels it; the callback never runs afterwards.
// Cost: the std::function, plus one libevent `event` (~130 bytes) allocated at the first arm (a
// stream's queue timer, armed only when the request waits for a slot, usually costs nothing).

#include <cstdint>
#include <functional>

struct event;

namespace cutline::proto {

class EventLoop;

class Timer {
 public:
  Timer(EventLoop& loop, std::function<void()> on_fire);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Fires once after `delay_ms` (0 = on the next loop iteration). Re-arming an armed timer
  // replaces its deadline.
  void arm(int64_t delay_ms);
  // Fires every `period_ms` (> 0) until cancel().
  void arm_periodic(int64_t period_ms);
  // Disarms; no effect when not armed.
  void cancel();
  // Disarms and frees the libevent event, for a timer that will not be armed again soon (a
  // stream's TTFT timer after the first token); a later arm() allocates one again.
  void release();
  bool armed() const;

 private:
  static void on_event(int fd, short what, void* arg);

  std::function<void()> on_fire_;
  event* event_ = nullptr;
  EventLoop& loop_;
  bool periodic_ = false;
};

}  // namespace cutline::proto
