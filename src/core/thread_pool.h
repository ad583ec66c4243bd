// Persistent worker threads: created once, woken for each parallel region, so a decode step pays no thread
// start-up cost. The calling thread takes part as worker 0.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
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
  // Not reentrant: fn must not call run() on the same pool.
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into one contiguous range per thread: fn(begin, end). Ranges depend only on n and size().
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

  static int physical_core_count();

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int, int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
};

}  // namespace tessera
