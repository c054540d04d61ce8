#pragma once
// EventLoop: one libevent event_base driven by one thread. Every connection, stream, timer and
// client in Cutline belongs to exactly one EventLoop and is touched only on that loop's thread;
// other threads hand work over with post().
//
// Who calls what:
//   - The owner constructs the loop on any thread, then calls run() on the thread that will drive
//     it (WorkerThreads does this for its workers). run() returns after stop().
//   - post() and stop() may be called from any thread, including the loop thread itself.
//   - Everything else (base(), objects created on the loop) is loop-thread only once run() has
//     started; before run() the constructing thread may set things up.
//
// Lifetime: destroy the loop after run() has returned and after every object created on it
// (connections, timers, listeners, clients) has been destroyed. Functions posted but not yet run
// when the loop is destroyed are destroyed without running.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct event_base;
struct event;

namespace cutline::proto {

class EventLoop {
 public:
  // `index` is a free label (WorkerThreads numbers its loops 0..N-1) so that per-worker state
  // (an HttpClient per worker, say) can be found from a stream's loop().
  explicit EventLoop(int index = 0);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs the loop on the calling thread until stop() is called. Returns at once if stop() was
  // called before. Posted functions run in the order they were posted.
  void run();
  // Makes run() return after the current callback. Thread-safe. Idempotent.
  void stop();

  // Runs `fn` on the loop thread soon (never inline, even when called on the loop thread).
  // Thread-safe. Functions posted after stop() may never run.
  void post(std::function<void()> fn);

  // True when called on the thread currently inside run().
  bool in_loop_thread() const;

  int index() const { return index_; }
  // The libevent base, for code in proto/ that creates events on it. Loop thread only.
  event_base* base() const { return base_; }

 private:
  static void on_wakeup(int fd, short what, void* arg);
  static void on_self_post(int fd, short what, void* arg);
  void drain_posted();

  int index_;
  event_base* base_ = nullptr;
  event* wakeup_event_ = nullptr;
  int wakeup_fd_ = -1;  // eventfd
  // post() from the loop thread itself activates this instead of writing the eventfd: no
  // write(), read() and extra epoll_wait (a stream that ends posts its own clean-up).
  event* self_post_event_ = nullptr;
  std::mutex mutex_;
  std::vector<std::function<void()>> posted_;
  std::atomic<std::thread::id> loop_thread_{};
  std::atomic<bool> stop_requested_{false};
};

}  // namespace cutline::proto
