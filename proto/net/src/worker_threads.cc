#include "cutline/proto/net/worker_threads.h"

#include <condition_variable>
#include <mutex>

namespace cutline::proto {

WorkerThreads::WorkerThreads(int count) {
  if (count < 1) count = 1;
  for (int i = 0; i < count; ++i) loops_.push_back(std::make_unique<EventLoop>(i));
}

WorkerThreads::~WorkerThreads() { stop(); }

void WorkerThreads::start() {
  if (!threads_.empty()) return;
  for (auto& loop : loops_) {
    EventLoop* l = loop.get();
    threads_.emplace_back([l] { l->run(); });
  }
}

void WorkerThreads::stop() {
  if (threads_.empty()) return;
  for (auto& loop : loops_) loop->stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void WorkerThreads::run_on_all_and_wait(const std::function<void(EventLoop&)>& fn) {
  std::mutex mutex;
  std::condition_variable done_cv;
  size_t done = 0;
  for (auto& loop : loops_) {
    EventLoop* l = loop.get();
    l->post([&, l] {
      fn(*l);
      std::lock_guard<std::mutex> lock(mutex);
      ++done;
      done_cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mutex);
  done_cv.wait(lock, [&] { return done == loops_.size(); });
}

}  // namespace cutline::proto
