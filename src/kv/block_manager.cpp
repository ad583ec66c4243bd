// Reference-counted block allocator with an LRU prefix cache (doubly linked free queue, O(1) operations).
#include "kv/block_manager.h"

#include <algorithm>

#include "core/check.h"

namespace tessera {

BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens) {
  // 64-bit mix of the parent hash and each token (splitmix-style finalizer per step).
  uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;
  for (int32_t t : tokens) {
    h ^= uint64_t(uint32_t(t)) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
  }
  return h == 0 ? 1 : h;  // 0 means "no parent"
}

BlockManager::BlockManager(int64_t n_blocks, int64_t block_size, bool prefix_caching)
    : block_size_(block_size), prefix_caching_(prefix_caching), blocks_(size_t(n_blocks)) {
  for (int32_t b = 0; b < int32_t(n_blocks); ++b) queue_push_back(b);
}

int64_t BlockManager::n_cached_free() const {
  int64_t n = 0;
  for (const auto& [hash, block] : cached_) n += blocks_[size_t(block)].ref_count == 0;
  return n;
}

void BlockManager::queue_push_back(int32_t block) {
  Block& b = blocks_[size_t(block)];
  b.prev = tail_;
  b.next = kNone;
  if (tail_ != kNone) blocks_[size_t(tail_)].next = block;
  tail_ = block;
  if (head_ == kNone) head_ = block;
  ++n_free_;
}

void BlockManager::queue_remove(int32_t block) {
  Block& b = blocks_[size_t(block)];
  if (b.prev != kNone) blocks_[size_t(b.prev)].next = b.next; else head_ = b.next;
  if (b.next != kNone) blocks_[size_t(b.next)].prev = b.prev; else tail_ = b.prev;
  b.prev = b.next = kNone;
  --n_free_;
}

void BlockManager::uncache(int32_t block) {
  Block& b = blocks_[size_t(block)];
  if (!b.cached) return;
  auto it = cached_.find(b.hash);
  if (it != cached_.end() && it->second == block) cached_.erase(it);
  b.cached = false;
  b.tokens.clear();
}

std::optional<int32_t> BlockManager::allocate() {
  if (head_ == kNone) return std::nullopt;
  const int32_t block = head_;
  queue_remove(block);
  uncache(block);  // evicted: its contents are about to be overwritten
  blocks_[size_t(block)].ref_count = 1;
  return block;
}

void BlockManager::release(int32_t block) {
  Block& b = blocks_[size_t(block)];
  TESSERA_CHECK(b.ref_count > 0);
  if (--b.ref_count == 0) queue_push_back(block);
}

void BlockManager::share(int32_t block) {
  Block& b = blocks_[size_t(block)];
  TESSERA_CHECK(b.ref_count > 0);
  ++b.ref_count;
}

std::vector<int32_t> BlockManager::match_prefix(std::span<const int32_t> tokens, int64_t max_blocks,
                                                BlockHash seed) {
  std::vector<int32_t> matched;
  if (!prefix_caching_) return matched;
  BlockHash parent = seed;
  const int64_t n_full = std::min<int64_t>(int64_t(tokens.size()) / block_size_, max_blocks);
  for (int64_t i = 0; i < n_full; ++i) {
    const auto block_tokens = tokens.subspan(size_t(i * block_size_), size_t(block_size_));
    const BlockHash h = hash_block(parent, block_tokens);
    auto it = cached_.find(h);
    if (it == cached_.end()) break;
    Block& b = blocks_[size_t(it->second)];
    if (!std::equal(b.tokens.begin(), b.tokens.end(), block_tokens.begin(), block_tokens.end())) break;
    if (b.ref_count == 0) queue_remove(it->second);
    ++b.ref_count;
    matched.push_back(it->second);
    parent = h;
  }
  return matched;
}

BlockHash BlockManager::register_full_block(int32_t block, BlockHash parent, std::span<const int32_t> tokens) {
  const BlockHash h = hash_block(parent, tokens);
  if (!prefix_caching_) return h;
  Block& b = blocks_[size_t(block)];
  if (b.cached) return b.hash;
  // An identical block computed by another sequence may already be registered: keep that one.
  if (cached_.emplace(h, block).second) {
    b.cached = true;
    b.hash = h;
    b.tokens.assign(tokens.begin(), tokens.end());
  }
  return h;
}

}  // namespace tessera
