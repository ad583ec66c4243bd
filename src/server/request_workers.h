// A small pool of threads for the CPU work of a request before it reaches the engine: parsing the JSON body,
// rendering the chat template, tokenizing. The io thread hands each request here and goes back to the sockets,
// so that one large or hostile body never holds up /health, /metrics or the streams of everyone else. The
// threads run at a lower CPU priority than the process (nice +5), so the io thread and the engine's step
// preempt them. The queue is bounded: when it is full, post() refuses and the caller answers 503.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera::server {

class RequestWorkers {
 public:
  // `n_threads`: 0 picks a quarter of the hardware threads, from 1 to 4 (they share the machine with the engine,
  // which wants every core); at most `max_queued` jobs wait (beyond those running). The threads are named
  // `name`-0, `name`-1, ...
  RequestWorkers(int n_threads, size_t max_queued, std::string name = "request");
  ~RequestWorkers();  // finishes the running jobs, drops the queued ones
  RequestWorkers(const RequestWorkers&) = delete;
  RequestWorkers& operator=(const RequestWorkers&) = delete;

  // Queues `job`; false (nothing queued) when the queue is full or the pool is stopping. A job must not throw.
  bool post(std::function<void()> job);
  size_t n_queued() const;

 private:
  void run(const std::string& thread_name);

  size_t max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::server
