#include "cutline/device/thread_pool.h"

#include <cassert>

namespace cutline::device {

ThreadPool::ThreadPool(int32_t n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int32_t t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::drain(int32_t thread) {
  for (;;) {
    const int64_t task = next_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) return;
    (*fn_)(task, thread);
  }
}

void ThreadPool::worker(int32_t thread) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain(thread);
    if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_one();
    }
  }
}

void ThreadPool::run(int64_t n_tasks, const std::function<void(int64_t, int32_t)>& fn) {
  if (n_tasks <= 0) return;
  if (n_tasks == 1 || workers_.empty()) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_tasks_ = n_tasks;
    next_.store(0, std::memory_order_relaxed);
    active_.store(static_cast<int32_t>(workers_.size()), std::memory_order_relaxed);
    ++generation_;
  }
  wake_.notify_all();
  drain(0);
  // Spin briefly (ops are short), then block until every worker has left this run.
  for (int spin = 0; spin < 20000; ++spin) {
    if (active_.load(std::memory_order_acquire) == 0) return;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return active_.load(std::memory_order_acquire) == 0; });
}

}  // namespace cutline::device
