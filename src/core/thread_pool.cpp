// Spin-then-sleep thread pool. Regions are short (about a hundred per token, some only microseconds long), so
// waking through a condition variable each time would cost more than the work; spinning briefly first keeps a
// region's start and end at well under a microsecond while idle pools still sleep.
#include "core/thread_pool.h"

#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "core/thread_name.h"

namespace tessera {
namespace {

// Waiting goes pause-spin (a few µs: the next region usually starts that soon), then yield-spin (tens of µs;
// on an oversubscribed machine this hands the core to the thread we wait for instead of burning it), then a
// blocking wait.
constexpr int kPauseIterations = 1 << 9;
constexpr int kYieldIterations = 1 << 7;

// Spins until done() holds or the spin budget is spent; returns done().
template <typename Done>
bool spin_until(Done done) {
  for (int i = 0; i < kPauseIterations; ++i) {
    if (done()) return true;
    __builtin_ia32_pause();
  }
  for (int i = 0; i < kYieldIterations; ++i) {
    if (done()) return true;
    std::this_thread::yield();
  }
  return done();
}

}  // namespace

int ThreadPool::physical_core_count() {
  // Count distinct (physical id, core id) pairs: hyper-threads share a core's FMA units, so they do not help
  // bandwidth- or compute-bound kernels.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, physical = "0";
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (line.rfind("physical id", 0) == 0) physical = value;
    if (line.rfind("core id", 0) == 0) cores.emplace(physical, value);
  }
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  if (cores.empty()) return hw > 0 ? hw : 1;
  const int physical_cores = static_cast<int>(cores.size());
  // A cgroup or affinity mask may grant fewer CPUs than the machine has cores.
  return hw > 0 && hw < physical_cores ? hw : physical_cores;
}

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads > 0 ? n_threads : physical_core_count()), cursors_(new Cursor[n_threads_]) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  name_this_thread("compute-" + std::to_string(index));
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = seen;
    if (!spin_until([&] { return (gen = generation_.load(std::memory_order_acquire)) != seen; })) {
      // Announce the sleep before re-checking, so run() either sees the counter or we see its new generation.
      sleeping_workers_.fetch_add(1);
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load() != seen; });
      }
      sleeping_workers_.fetch_sub(1);
      gen = generation_.load(std::memory_order_acquire);
    }
    if (stopping_.load()) return;
    seen = gen;
    job_call_(job_fn_, index, n_threads_);
    if (pending_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      std::lock_guard lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::run_impl(void* fn, Trampoline call) {
  if (n_threads_ == 1) {
    call(fn, 0, 1);
    return;
  }
  job_fn_ = fn;
  job_call_ = call;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);  // seq_cst: pairs with the workers' sleeping_workers_ announcement
  if (sleeping_workers_.load() > 0) {
    std::lock_guard lock(mutex_);
    wake_.notify_all();
  }
  call(fn, 0, n_threads_);
  if (spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) return;
  caller_sleeping_.store(true);
  {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  caller_sleeping_.store(false);
}

}  // namespace tessera
