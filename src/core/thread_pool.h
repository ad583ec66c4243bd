// Persistent worker threads: created once, woken for each parallel region, so a decode step pays no thread
// start-up cost. The calling thread takes part as worker 0.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace tessera {

class ThreadPool {
 public:
  // n_threads counts the caller; 0 means one per physical core.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(thread_index, n_threads) once on every thread and returns when all have finished.
  // Not reentrant: fn must not call run() on the same pool. fn is borrowed, never copied, so a region costs no
  // heap allocation (a lambda passed here is not wrapped in a std::function).
  template <typename Fn>
  void run(Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run_impl(const_cast<void*>(static_cast<const void*>(&fn)),
             [](void* f, int index, int count) { (*static_cast<F*>(f))(index, count); });
  }
  void run(const std::function<void(int, int)>& fn) { run<const std::function<void(int, int)>&>(fn); }

  // Splits [0, n) into one contiguous range per thread: fn(begin, end). Ranges depend only on n and size().
  template <typename Fn>
  void parallel_for(int64_t n, Fn&& fn) {
    run([&](int index, int count) {
      const int64_t begin = n * index / count;
      const int64_t end = n * (index + 1) / count;
      if (begin < end) fn(begin, end);
    });
  }
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    parallel_for<const std::function<void(int64_t, int64_t)>&>(n, fn);
  }

  static int physical_core_count();

 private:
  using Trampoline = void (*)(void*, int, int);
  void run_impl(void* fn, Trampoline call);
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;

  // The current region; written by the caller before generation_ is bumped, read by workers after they see it.
  void* job_fn_ = nullptr;
  Trampoline job_call_ = nullptr;

  // Workers spin on generation_ for a few tens of microseconds (the gap between two matmuls of one token), then
  // sleep on wake_. The caller spins on pending_ likewise, then sleeps on done_. The sleeper counts let the
  // other side skip the mutex and the futex call whenever nobody sleeps: the common case in a decode step.
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
};

}  // namespace tessera
