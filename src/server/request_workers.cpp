// The request worker threads.
#include "server/request_workers.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "core/thread_name.h"

namespace tessera::server {

RequestWorkers::RequestWorkers(int n_threads, size_t max_queued, std::string name) : max_queued_(max_queued) {
  if (n_threads <= 0) n_threads = std::clamp(int(std::thread::hardware_concurrency()) / 4, 1, 4);
  for (int i = 0; i < n_threads; ++i)
    threads_.emplace_back([this, thread_name = name + "-" + std::to_string(i)] { run(thread_name); });
}

RequestWorkers::~RequestWorkers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    jobs_.clear();
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool RequestWorkers::post(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || jobs_.size() >= max_queued_) return false;
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
  return true;
}

size_t RequestWorkers::n_queued() const {
  std::lock_guard lock(mutex_);
  return jobs_.size();
}

void RequestWorkers::run(const std::string& thread_name) {
  name_this_thread(thread_name);
  // Linux applies a nice value per thread: this one yields to the io and engine threads under load. Failing to
  // lower it (a sandbox forbidding it) only costs that preference.
  const int base = getpriority(PRIO_PROCESS, 0);
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), base + 5);
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace tessera::server
