// ThreadPool: every thread runs each region once, ranges cover [0, n) exactly (also when handed out in chunks,
// and a thread held up has its share's chunks taken by the others), many short regions in a row (spinning) and
// regions after an idle pause (sleeping) both complete, the pool shuts down cleanly, and its workers carry names
// an operator can read (a name over Linux's 15 bytes is cut, not refused).
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_name.h"
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

std::string this_thread_name() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

TEST(ThreadPool, WorkersAreNamedAndLongNamesAreCut) {
  ThreadPool pool(3);
  std::mutex mutex;
  std::set<std::string> names;
  pool.run([&](int index, int) {
    if (index == 0) return;  // the caller's thread keeps its own name
    std::lock_guard lock(mutex);
    names.insert(this_thread_name());
  });
  EXPECT_EQ(names, (std::set<std::string>{"compute-1", "compute-2"}));
  std::string cut;
  std::thread([&] {
    name_this_thread("a-name-longer-than-fifteen-bytes");
    cut = this_thread_name();
  }).join();
  EXPECT_EQ(cut, "a-name-longer-t");
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

TEST(ThreadPool, DynamicChunksCoverRangeExactly) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      for (int64_t chunk : {1, 3, 64, 5000}) {
        std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
        std::atomic<int> calls{0};
        pool.parallel_for_dynamic(n, chunk, [&](int index, int64_t begin, int64_t end) {
          EXPECT_GE(index, 0);
          EXPECT_LT(index, threads);
          EXPECT_LT(begin, end);
          EXPECT_LE(end - begin, chunk);
          calls.fetch_add(1);
          for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
        });
        for (auto& s : seen) EXPECT_EQ(s.load(), 1) << threads << " threads, n " << n << ", chunk " << chunk;
        // Chunks never straddle two shares: at most one short chunk per share.
        int64_t most = 0;
        for (int t = 0; t < threads; ++t) most += (n * (t + 1) / threads - n * t / threads + chunk - 1) / chunk;
        EXPECT_LE(calls.load(), most);
      }
    }
  }
}

// dynamic_chunk: whole units, at least one, and about chunks_per_share of them per thread's share (never more).
TEST(ThreadPool, DynamicChunkIsWholeUnitsPerShare) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 63, 64, 1000, 5632 + 256, 1 << 20}) {
      for (int64_t per_share : {1, 8, 16}) {
        for (int64_t unit : {1, 32, 64}) {
          const int64_t chunk = pool.dynamic_chunk(n, per_share, unit);
          EXPECT_GE(chunk, unit);
          EXPECT_EQ(chunk % unit, 0);
          const int64_t share = (n + threads - 1) / threads;
          // More than one unit only when a share holds per_share chunks of that size.
          if (chunk > unit) {
            EXPECT_LE(chunk * per_share, share) << threads << " threads, n " << n;
          }
          // And no smaller than a whole number of units allows: one more unit would be too many for the share.
          EXPECT_GT((chunk + unit) * per_share, share) << threads << " threads, n " << n;
        }
      }
    }
  }
}

// Whichever thread takes the first chunk of the second share is held there until the others have run
// everything else: the share's other chunks must have been taken by them (with fixed shares the region would
// wait for the held thread to do them all).
TEST(ThreadPool, DynamicChunksOfAHeldThreadAreTakenByOthers) {
  ThreadPool pool(3);
  constexpr int64_t kN = 300, kChunk = 10;
  std::vector<std::atomic<int>> by(kN);
  for (auto& b : by) b.store(-1);
  std::atomic<int64_t> done{0};
  std::atomic<int> held{-1};
  pool.parallel_for_dynamic(kN, kChunk, [&](int index, int64_t begin, int64_t end) {
    if (begin == kN / 3) {
      held.store(index);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (done.load() < kN - kChunk && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    }
    for (int64_t i = begin; i < end; ++i) by[static_cast<size_t>(i)].store(index);
    done.fetch_add(end - begin);
  });
  EXPECT_EQ(done.load(), kN);
  ASSERT_GE(held.load(), 0);
  for (int64_t i = kN / 3 + kChunk; i < 2 * kN / 3; ++i) EXPECT_NE(by[static_cast<size_t>(i)].load(), held.load()) << i;
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
