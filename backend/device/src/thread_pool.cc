#include "cutline/device/thread_pool.h"

#include <algorithm>
#include <cassert>
#include <chrono>

namespace cutline::device {
namespace {

constexpr auto kSpin = std::chrono::microseconds(300);

inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

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

void ThreadPool::drain(uint32_t generation, int64_t n_tasks,
                       const std::function<void(int64_t, int32_t)>* fn, int32_t thread) {
  // Each claim takes a share of what is left, down to one task: a few contiguous claims while
  // much is left, single tasks near the end so that the threads finish together. Every claim
  // moves the counter's cache line between cores: on a 2-vCPU virtual machine, with one claim
  // (and one completion count) per task, cutting a decode step's matmuls into 64 tasks instead
  // of 16 doubled the step's CPU time. The price: a core preempted right after a large claim
  // holds the run back by up to that share.
  const int64_t share = 2 * static_cast<int64_t>(n_threads_);
  int64_t done = 0;
  uint64_t cur = next_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(cur >> 32) != generation) break;
    const int64_t task = static_cast<int64_t>(cur & 0xFFFFFFFFu);
    if (task >= n_tasks) break;
    const int64_t take = std::max<int64_t>(1, (n_tasks - task) / share);
    if (!next_.compare_exchange_weak(cur, cur + static_cast<uint64_t>(take),
                                     std::memory_order_acq_rel))
      continue;
    for (int64_t t = task; t < task + take; ++t) (*fn)(t, thread);
    done += take;
    cur = next_.load(std::memory_order_acquire);
  }
  // One count per drain, after this thread's last task of the run: the run is complete once
  // every thread that claimed tasks has counted them.
  if (done > 0 && completed_.fetch_add(done, std::memory_order_acq_rel) + done == n_tasks) {
    std::lock_guard<std::mutex> lock(mu_);
    if (waiting_) done_.notify_one();
  }
}

void ThreadPool::worker(int32_t thread) {
  uint32_t seen = 0;
  for (;;) {
    // A forward pass is a chain of short runs (a decode step's matmuls take 50-300 us each) with
    // microseconds between them, while a condition-variable wake-up takes tens of microseconds
    // on a virtual machine: a sleeping worker would find each run already drained by the caller.
    // So a worker first watches for the next run for kSpin, then sleeps.
    const auto spin_end = std::chrono::steady_clock::now() + kSpin;
    while (static_cast<uint32_t>(next_.load(std::memory_order_acquire) >> 32) == seen) {
      for (int i = 0; i < 32; ++i) cpu_relax();
      if (std::chrono::steady_clock::now() >= spin_end) break;
    }
    uint32_t generation;
    int64_t n_tasks;
    const std::function<void(int64_t, int32_t)>* fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation = generation_;
      n_tasks = n_tasks_;
      fn = fn_;
    }
    drain(generation, n_tasks, fn, thread);
  }
}

void ThreadPool::run(int64_t n_tasks, const std::function<void(int64_t, int32_t)>& fn) {
  if (n_tasks <= 0) return;
  if (n_tasks == 1 || workers_.empty()) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  assert(n_tasks < (int64_t{1} << 32));
  uint32_t generation;
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation = ++generation_;
    fn_ = &fn;
    n_tasks_ = n_tasks;
    completed_.store(0, std::memory_order_relaxed);
    next_.store(static_cast<uint64_t>(generation) << 32, std::memory_order_release);
  }
  wake_.notify_all();
  drain(generation, n_tasks, &fn, 0);
  // Wait only for tasks other threads claimed; workers that never woke are not waited for.
  for (int spin = 0; spin < 4000; ++spin) {
    if (completed_.load(std::memory_order_acquire) == n_tasks) return;
    cpu_relax();
  }
  std::unique_lock<std::mutex> lock(mu_);
  waiting_ = true;
  done_.wait(lock, [&] { return completed_.load(std::memory_order_acquire) == n_tasks; });
  waiting_ = false;
}

}  // namespace cutline::device
