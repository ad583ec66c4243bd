// BlockManager: exact block ids, reference counts, eviction order and prefix matching.
#include <gtest/gtest.h>

#include <numeric>

#include "kv/block_manager.h"

namespace tessera {
namespace {

std::vector<int32_t> iota_tokens(int n, int start = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

TEST(BlockManager, AllocatesInOrderAndCountsReferences) {
  BlockManager bm(4, 2, true);
  EXPECT_EQ(*bm.allocate(), 0);
  EXPECT_EQ(*bm.allocate(), 1);
  EXPECT_EQ(bm.n_free(), 2);
  bm.share(1);
  EXPECT_EQ(bm.ref_count(1), 2);
  bm.release(1);
  EXPECT_EQ(bm.n_free(), 2);
  bm.release(1);
  EXPECT_EQ(bm.n_free(), 3);
  EXPECT_EQ(*bm.allocate(), 2);
  EXPECT_EQ(*bm.allocate(), 3);
  EXPECT_EQ(*bm.allocate(), 1);  // freed blocks queue behind never-used ones
  EXPECT_FALSE(bm.allocate().has_value());
}

TEST(BlockManager, PrefixMatchRevivesCachedBlocksAndEvictsLeastRecentlyUsed) {
  BlockManager bm(4, 2, true);
  const auto a = iota_tokens(4, 10);  // two full blocks
  const int32_t b0 = *bm.allocate(), b1 = *bm.allocate();
  const BlockHash h0 = bm.register_full_block(b0, 0, std::span(a).subspan(0, 2));
  bm.register_full_block(b1, h0, std::span(a).subspan(2, 2));
  EXPECT_EQ(bm.n_cached(), 2);
  // The sequence ends: blocks are released in reverse (tail first) and stay cached.
  bm.release(b1);
  bm.release(b0);
  EXPECT_EQ(bm.n_free(), 4);
  EXPECT_EQ(bm.n_cached_free(), 2);

  // Same prefix: both blocks come back with a reference, no allocation.
  auto matched = bm.match_prefix(a, 10);
  EXPECT_EQ(matched, (std::vector<int32_t>{b0, b1}));
  EXPECT_EQ(bm.ref_count(b0), 1);
  EXPECT_EQ(bm.n_free(), 2);
  // A prefix that diverges in the second block matches only the first.
  bm.release(b1);
  bm.release(b0);
  auto other = a;
  other[3] = 999;
  EXPECT_EQ(bm.match_prefix(other, 10), (std::vector<int32_t>{b0}));
  bm.release(b0);

  // Free queue now: 2, 3 (never used), then b1, b0 in release order. Allocating three evicts b1 first.
  EXPECT_EQ(*bm.allocate(), 2);
  EXPECT_EQ(*bm.allocate(), 3);
  EXPECT_EQ(*bm.allocate(), b1);
  EXPECT_EQ(bm.n_cached(), 1);  // b1's entry is gone; b0 is still reusable
  EXPECT_EQ(bm.match_prefix(a, 10), (std::vector<int32_t>{b0}));
}

TEST(BlockManager, MatchRespectsTheBlockLimitAndHashChain) {
  BlockManager bm(8, 4, true);
  const auto t = iota_tokens(12);
  BlockHash parent = 0;
  std::vector<int32_t> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(*bm.allocate());
    parent = bm.register_full_block(ids.back(), parent, std::span(t).subspan(size_t(i) * 4, 4));
  }
  for (int32_t id : ids) bm.release(id);
  EXPECT_EQ(bm.match_prefix(t, 2).size(), 2u);
  for (int32_t id : {ids[0], ids[1]}) bm.release(id);
  // The same block contents at a different position (other parent) do not match.
  std::vector<int32_t> shifted(t.begin() + 4, t.end());
  EXPECT_TRUE(bm.match_prefix(shifted, 10).empty());
}

// Tenants' prompts hash under different seeds: the same tokens cached under one seed never match under another.
TEST(BlockManager, SeedsSeparateHashChains) {
  BlockManager bm(8, 4, true);
  const auto t = iota_tokens(8);
  const BlockHash tenant_a = 0x1234, tenant_b = 0x5678;
  std::vector<int32_t> ids;
  BlockHash parent = tenant_a;
  for (int i = 0; i < 2; ++i) {
    ids.push_back(*bm.allocate());
    parent = bm.register_full_block(ids.back(), parent, std::span(t).subspan(size_t(i) * 4, 4));
  }
  for (int32_t id : ids) bm.release(id);
  EXPECT_TRUE(bm.match_prefix(t, 10, tenant_b).empty());
  EXPECT_TRUE(bm.match_prefix(t, 10).empty());
  const auto same = bm.match_prefix(t, 10, tenant_a);
  EXPECT_EQ(same, ids);
  for (int32_t id : same) bm.release(id);
  EXPECT_NE(hash_block(tenant_a, std::span(t).subspan(0, 4)), hash_block(tenant_b, std::span(t).subspan(0, 4)));
}

TEST(BlockManager, DisabledCacheNeverMatches) {
  BlockManager bm(4, 2, false);
  const auto t = iota_tokens(4);
  const int32_t b = *bm.allocate();
  bm.register_full_block(b, 0, std::span(t).subspan(0, 2));
  bm.release(b);
  EXPECT_TRUE(bm.match_prefix(t, 10).empty());
  EXPECT_EQ(bm.n_cached(), 0);
}

}  // namespace
}  // namespace tessera
