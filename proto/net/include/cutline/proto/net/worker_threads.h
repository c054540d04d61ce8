#pragma once
// WorkerThreads: N EventLoops, each run by its own thread. The gateway, the backend's HTTP side
// and the tools create one group and put listeners, servers and clients on its loops (an
// HttpServer puts one SO_REUSEPORT listener on every loop, so the kernel spreads connections).
//
// Threading: construct, start() and stop() from one controlling thread (not a worker).
// loop(i) may be read from any thread; what you do with a loop follows EventLoop's rules.
//
// Lifetime: stop() (or the destructor) stops every loop and joins the threads. Objects living on
// the loops (servers, clients) must be destroyed before the group — HttpServer::stop() does that
// for its own connections.

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "cutline/proto/net/event_loop.h"

namespace cutline::proto {

class WorkerThreads {
 public:
  // Creates `count` loops (at least 1) numbered 0..count-1. Threads start in start().
  explicit WorkerThreads(int count);
  ~WorkerThreads();
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;

  // Starts one thread per loop. Idempotent.
  void start();
  // Stops every loop and joins the threads. Idempotent.
  void stop();
  bool running() const { return !threads_.empty(); }

  int size() const { return static_cast<int>(loops_.size()); }
  EventLoop& loop(int i) { return *loops_[static_cast<size_t>(i)]; }

  // Runs `fn` on every loop and waits until all of them have run it. Must not be called from a
  // worker thread (it would wait on itself). Requires running().
  void run_on_all_and_wait(const std::function<void(EventLoop&)>& fn);

 private:
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<std::thread> threads_;
};

}  // namespace cutline::proto
