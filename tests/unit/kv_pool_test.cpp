// KvPool's storage: zero-filled, and resident only where blocks have been written.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "core/huge_pages.h"
#include "kernels/attention.h"
#include "kv/kv_pool.h"

namespace tessera {
namespace {

// Resident bytes of the pool's own pages (mincore), whatever mappings the kernel merged it with.
uint64_t resident_pool_bytes(const KvPool& pool) {
  const auto page = size_t(::sysconf(_SC_PAGESIZE));
  // Blocks are laid out one after another, so block 0's keys start the storage (page-aligned: 2 MiB).
  auto* begin = const_cast<uint8_t*>(pool.keys(0, 0));
  const size_t pages = (size_t(pool.total_bytes()) + page - 1) / page;
  std::vector<unsigned char> resident(pages);
  EXPECT_EQ(::mincore(begin, pages * page, resident.data()), 0);
  return uint64_t(std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; })) * page;
}

TEST(KvPool, StorageIsZeroAndResidentOnlyWhereWritten) {
  // 256 blocks of 16 positions, 4 layers, 8 kv heads of 128: 256 KiB a block, 64 MiB in F16.
  KvPool pool(4, 8, 128, 256, 16, KvType::F16);
  ASSERT_EQ(pool.total_bytes(), uint64_t(64) << 20);
  EXPECT_LT(resident_pool_bytes(pool), pool.total_bytes() / 8) << "resident before any write";

  const uint8_t* keys = pool.keys(5, 2);
  EXPECT_TRUE(std::all_of(keys, keys + 16 * 8 * 128 * 2, [](uint8_t b) { return b == 0; }));

  // Writing every position of 4 blocks makes those blocks resident (one huge page at most), not the pool.
  std::vector<float> k(8 * 128, 0.5f), v(8 * 128, -0.25f);
  for (int32_t block = 0; block < 4; ++block) {
    for (int64_t layer = 0; layer < 4; ++layer) {
      for (int64_t slot = 0; slot < 16; ++slot) pool.store(block, layer, slot, k.data(), v.data());
    }
  }
  const uint64_t resident = resident_pool_bytes(pool);
  EXPECT_GE(resident, 4 * pool.bytes_per_block());
  EXPECT_LT(resident, pool.total_bytes() / 2);
  std::vector<float> row(8 * 128);
  decode_kv_row(KvType::F16, pool.values(3, 1) + 15 * 8 * 128 * 2, nullptr, 8, 128, row.data());
  EXPECT_EQ(row.front(), -0.25f);
  EXPECT_EQ(row.back(), -0.25f);
}

TEST(AnonymousMemory, IsHugePageAlignedAndMoves) {
  AnonymousMemory a(4096), b;
  ASSERT_EQ(a.size(), 4096u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % kHugePageBytes, 0u);
  EXPECT_EQ(a.data()[17], 0);
  a.data()[4095] = 7;
  b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  ASSERT_EQ(b.size(), 4096u);
  EXPECT_EQ(b.data()[4095], 7);
  AnonymousMemory c(std::move(b));
  EXPECT_EQ(c.data()[4095], 7);
  EXPECT_EQ(AnonymousMemory(0).data(), nullptr);
}

}  // namespace
}  // namespace tessera
