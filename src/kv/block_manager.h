// Who owns which KV block: reference counts, a free queue in eviction order, and the prefix cache.
//
// A full block is identified by the hash of its tokens chained with the previous block's hash, so equal
// prefixes map to equal hash chains. The chain starts from a seed (0 by default): prefixes under different
// seeds never share blocks, which keeps tenants' caches apart. Blocks whose reference count drops to zero keep their contents and
// hash ("cached") and sit in the free queue; allocation takes the least recently freed block first, which
// evicts the least recently used cached prefix. A later request with the same prefix revives such blocks
// without recomputing them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace tessera {

using BlockHash = uint64_t;

// Hash of one full block of tokens following the block whose hash is `parent` (the chain's seed for the first
// block, 0 unless a namespace was given).
BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens);

class BlockManager {
 public:
  BlockManager(int64_t n_blocks, int64_t block_size, bool prefix_caching);

  int64_t n_blocks() const { return int64_t(blocks_.size()); }
  int64_t block_size() const { return block_size_; }
  int64_t n_free() const { return n_free_; }  // allocatable now (includes evictable cached blocks)
  int64_t n_used() const { return n_blocks() - n_free_; }
  int64_t n_cached() const { return int64_t(cached_.size()); }  // blocks registered in the prefix cache
  int64_t n_cached_free() const;                                // cached blocks nobody references
  int32_t ref_count(int32_t block) const { return blocks_[size_t(block)].ref_count; }

  // A block for exclusive use (ref count 1), or nothing when none is free. Evicts a cached block if needed.
  std::optional<int32_t> allocate();
  // Drops one reference; at zero the block joins the free queue (keeping its cached contents).
  void release(int32_t block);
  // Another holder of the same block (copy-on-write sharing).
  void share(int32_t block);

  // The longest run of cached blocks matching the full blocks of `tokens` under the hash chain that starts at
  // `seed`, each with a reference taken. At most `max_blocks` blocks are returned.
  std::vector<int32_t> match_prefix(std::span<const int32_t> tokens, int64_t max_blocks, BlockHash seed = 0);
  // Records that `block` holds the full block of `tokens` (block_size of them) after `parent`; returns its hash.
  BlockHash register_full_block(int32_t block, BlockHash parent, std::span<const int32_t> tokens);

 private:
  static constexpr int32_t kNone = -1;
  struct Block {
    int32_t ref_count = 0;
    bool cached = false;
    BlockHash hash = 0;
    std::vector<int32_t> tokens;  // the cached block's tokens, to rule out hash collisions
    int32_t prev = kNone, next = kNone;  // free queue links (valid while ref_count == 0)
  };

  void queue_push_back(int32_t block);
  void queue_remove(int32_t block);
  void uncache(int32_t block);

  int64_t block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  int32_t head_ = kNone, tail_ = kNone;  // free queue: head is evicted first
  int64_t n_free_ = 0;
  std::unordered_map<BlockHash, int32_t> cached_;
};

}  // namespace tessera
