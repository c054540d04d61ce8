#pragma once
// ThreadPool: the CPU device's workers, created once and reused by every op (no thread creation
// per op). run(n_tasks, fn) calls fn(task) for every task in [0, n_tasks) across the workers and
// the calling thread, and returns when all are done. Which thread runs which task is not
// deterministic; kernels therefore make every task's result independent of that.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cutline::device {

class ThreadPool {
 public:
  explicit ThreadPool(int32_t n_threads);  // n_threads >= 1, including the caller
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t size() const { return n_threads_; }
  // fn(task, thread) with thread in [0, size()) unique among concurrently running calls.
  void run(int64_t n_tasks, const std::function<void(int64_t task, int32_t thread)>& fn);

 private:
  void worker(int32_t thread);
  // Claims and runs tasks of run `generation` until none is left; the claim fails once the
  // run's tasks are all taken or a newer run has started, so a late worker never touches a
  // finished run's function.
  void drain(uint32_t generation, int64_t n_tasks, const std::function<void(int64_t, int32_t)>* fn,
             int32_t thread);

  const int32_t n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint32_t generation_ = 0;                                    // guarded by mu_; bumped per run()
  bool stop_ = false;                                          // guarded by mu_
  const std::function<void(int64_t, int32_t)>* fn_ = nullptr;  // guarded by mu_
  int64_t n_tasks_ = 0;                                        // guarded by mu_
  // (generation << 32) | next task index of the current run. The two counters sit on cache
  // lines of their own: a claim and a completion on different cores do not contend.
  alignas(64) std::atomic<uint64_t> next_{0};
  alignas(64) std::atomic<int64_t> completed_{0};  // tasks of the current run finished
  bool waiting_ = false;                           // guarded by mu_: the caller sleeps on done_
};

}  // namespace cutline::device
