// The memory check that refuses a model whose weights cannot stay resident.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/memory_info.h"
#include "engine/kv_sizing.h"
#include "model/memory_fit.h"
#include "model/model.h"
#include "hf_test_folder.h"

namespace tessera {
namespace {

TEST(MemoryFit, RefusesWeightsLargerThanAvailableMemoryWithSizesAndTheOverride) {
  const auto model = Model::load_embedded();
  const uint64_t needed = model->weight_bytes();
  ASSERT_GT(needed, 1000u);
  EXPECT_NO_THROW(require_weights_fit_in_memory(*model, needed));
  EXPECT_NO_THROW(require_weights_fit_in_memory(*model, 0));  // unknown: no check
  try {
    require_weights_fit_in_memory(*model, needed - 1);
    FAIL() << "a model one byte too large was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("GiB of memory but only"), std::string::npos) << message;
    EXPECT_EQ(message.find("--"), std::string::npos) << "the library names no flag: " << message;
    EXPECT_NE(message.find(model->name()), std::string::npos) << message;
  }
}

TEST(MemoryFit, ThisMachineReportsAvailableMemory) {
  const uint64_t available = available_memory_bytes();
  EXPECT_GT(available, uint64_t{64} << 20);  // Linux reports MemAvailable; any test machine has 64 MiB free
}

TEST(MemoryFit, KvCacheBudgetIsWhatTheWeightsAndTheReserveLeave) {
  const auto model = Model::load_embedded();
  const uint64_t weights = model->weight_bytes(), gib = uint64_t{1} << 30;
  EXPECT_EQ(kv_cache_budget_bytes(*model, 0), UINT64_MAX);  // unknown: no limit
  EXPECT_EQ(kv_cache_budget_bytes(*model, 16 * gib), 16 * gib - weights - gib);  // reserve 1/16
  EXPECT_EQ(kv_cache_budget_bytes(*model, 2 * gib), 2 * gib - weights - (uint64_t{256} << 20));  // at least 256 MiB
  EXPECT_EQ(kv_cache_budget_bytes(*model, weights), 0u);
}

TEST(MemoryFit, RefusesAKvCacheThatDoesNotFitBesideTheWeights) {
  const auto model = Model::load_embedded();
  const uint64_t weights = model->weight_bytes();
  EXPECT_NO_THROW(require_kv_cache_fits_in_memory(*model, 1000, weights + 1000, "-c 512"));
  EXPECT_NO_THROW(require_kv_cache_fits_in_memory(*model, 1u << 30, 0, "-c 512"));
  try {
    require_kv_cache_fits_in_memory(*model, 1001, weights + 1000, "-c 40960");
    FAIL() << "accepted";
  } catch (const MemoryFitError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("the KV cache for -c 40960"), std::string::npos) << message;
    EXPECT_EQ(message.find("--"), std::string::npos) << "the library names no flag: " << message;
    EXPECT_EQ(e.kv_source, "-c 40960");
    EXPECT_EQ(e.part, MemoryFitError::Part::KvCache);
  }
}

// Fake /proc/self/cgroup and /sys/fs/cgroup trees: v2 and v1 limits, the tightest level wins, page cache is free.
class CgroupFiles : public ::testing::Test {
 protected:
  testing::TempDir dir{"cgroup_files"};
  void write(const std::string& relative, const std::string& text) {
    const std::filesystem::path p = std::filesystem::path(dir.path) / relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  uint64_t available() { return cgroup_available_bytes(dir.path + "/self_cgroup", dir.path + "/root"); }
};

TEST_F(CgroupFiles, Version2LimitLessAnonymousMemoryOverTheGroupAndItsAncestors) {
  write("self_cgroup", "0::/pod/app\n");
  write("root/pod/app/memory.max", "max\n");
  write("root/pod/memory.max", "8000000000\n");
  write("root/pod/memory.stat", "anon 1000000000\nfile 5000000000\n");
  EXPECT_EQ(available(), 7000000000u);
  write("root/pod/app/memory.max", "3000000000\n");
  write("root/pod/app/memory.stat", "anon 500000000\n");
  EXPECT_EQ(available(), 2500000000u);
}

TEST_F(CgroupFiles, Version1MemoryControllerAndItsUnlimitedValue) {
  write("self_cgroup", "12:cpu,cpuacct:/\n4:memory:/docker/abc\n0::/\n");
  write("root/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  EXPECT_EQ(available(), 0u);
  write("root/memory/docker/abc/memory.limit_in_bytes", "4294967296\n");
  write("root/memory/docker/abc/memory.stat", "cache 3000000000\nrss 1\ntotal_cache 3000000000\ntotal_rss 294967296\n");
  EXPECT_EQ(available(), 4000000000u);
}

TEST_F(CgroupFiles, NoCgroupFileOrNoLimitIsUnknown) {
  EXPECT_EQ(available(), 0u);
  write("self_cgroup", "0::/\n");
  write("root/memory.max", "max\n");
  EXPECT_EQ(available(), 0u);
}

}  // namespace
}  // namespace tessera
