// ThreadPool: every thread runs each region once, ranges cover [0, n) exactly, many short regions in a row
// (spinning) and regions after an idle pause (sleeping) both complete, and the pool shuts down cleanly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace tessera {
namespace {

TEST(ThreadPool, RunsEveryThreadOnce) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    ASSERT_EQ(pool.size(), n);
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.run([&](int index, int count) {
      EXPECT_EQ(count, n);
      hits[static_cast<size_t>(index)].fetch_add(1);
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, ParallelForCoversRangeExactly) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 3, 7, 1000}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
    });
    for (auto& s : seen) EXPECT_EQ(s.load(), 1);
  }
}

TEST(ThreadPool, StdFunctionOverloadsStillWork) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  const std::function<void(int64_t, int64_t)> fn = [&](int64_t b, int64_t e) { sum += e - b; };
  pool.parallel_for(10, fn);
  const std::function<void(int, int)> job = [&](int, int) { sum += 1; };
  pool.run(job);
  EXPECT_EQ(sum.load(), 12);
}

TEST(ThreadPool, ManyShortRegionsThenIdleThenMore) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  for (int i = 0; i < 5000; ++i) pool.run([&](int index, int) { total += index + 1; });
  EXPECT_EQ(total.load(), 5000 * 3);
  // Long enough for the workers to give up spinning and block.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 0; i < 100; ++i) pool.run([&](int index, int) { total += index + 1; });
  EXPECT_EQ(total.load(), 5100 * 3);
}

TEST(ThreadPool, CallerWaitsForSlowWorker) {
  ThreadPool pool(2);
  std::atomic<bool> worker_done{false};
  pool.run([&](int index, int) {
    if (index == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the caller's spin: it must sleep
      worker_done = true;
    }
  });
  EXPECT_TRUE(worker_done.load());
}

TEST(ThreadPool, DestroysIdleAndFreshPools) {
  { ThreadPool fresh(4); }
  ThreadPool used(3);
  used.run([](int, int) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

TEST(ThreadPool, DefaultsToPhysicalCores) {
  ThreadPool pool;
  EXPECT_EQ(pool.size(), ThreadPool::physical_core_count());
  EXPECT_GE(pool.size(), 1);
}

}  // namespace
}  // namespace tessera
