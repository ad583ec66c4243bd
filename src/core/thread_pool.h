// Persistent worker threads: created once, woken for each parallel region, so a decode step pays no thread
// start-up cost. The calling thread takes part as worker 0.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
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

  // Like parallel_for, but [0, n) is cut into chunks of `chunk` (the last of a share may be shorter) that the
  // threads take as they go: each works through the chunks of its own even share in order, then takes what is
  // left of the others' shares. fn(thread_index, begin, end) runs once per chunk taken. For regions whose
  // threads finish apart although their shares are equal: on a shared host one core runs slower than the other
  // for seconds at a time, and with fixed shares every region then waits for that core (16-256 µs of a 580 µs
  // batch-16 matmul, measured on a 2-core Zen 5 VM). Which thread computes a chunk varies from run to run, so
  // fn's results must not depend on it. chunk >= 1.
  template <typename Fn>
  void parallel_for_dynamic(int64_t n, int64_t chunk, Fn&& fn) {
    if (n <= 0) return;
    const int count = n_threads_;
    for (int i = 0; i < count; ++i) cursors_[i].next.store(n * i / count, std::memory_order_relaxed);
    run([&](int index, int) {
      for (int k = 0; k < count; ++k) {
        const int owner = (index + k) % count;
        const int64_t end = n * (owner + 1) / count;
        for (;;) {
          const int64_t begin = cursors_[owner].next.fetch_add(chunk, std::memory_order_relaxed);
          if (begin >= end) break;
          fn(index, begin, std::min(begin + chunk, end));
        }
      }
    });
  }

  // A chunk for parallel_for_dynamic over [0, n) that cuts each thread's even share into about
  // `chunks_per_share` pieces: a whole number of `unit`s (the caller's tile columns or row blocks), at least one.
  int64_t dynamic_chunk(int64_t n, int64_t chunks_per_share, int64_t unit = 1) const {
    const int64_t share = (n + n_threads_ - 1) / n_threads_;
    return std::max<int64_t>(1, share / chunks_per_share / unit) * unit;
  }

  static int physical_core_count();

 private:
  using Trampoline = void (*)(void*, int, int);
  void run_impl(void* fn, Trampoline call);
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;

  // parallel_for_dynamic: the next unclaimed index of each thread's share, a cache line each. Set by the caller
  // before the region starts (run_impl's generation_ bump publishes them).
  struct alignas(64) Cursor {
    std::atomic<int64_t> next{0};
  };
  std::unique_ptr<Cursor[]> cursors_;

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
