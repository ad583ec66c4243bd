// Block storage and a free list.
#include "kv/kv_pool.h"

#include "core/error.h"

namespace tessera {

KvPool::KvPool(int64_t n_layer, int64_t kv_dim, int64_t n_blocks, int64_t block_size)
    : n_layer_(n_layer), kv_dim_(kv_dim), n_blocks_(n_blocks), block_size_(block_size) {
  if (n_blocks <= 0 || block_size <= 0) fail("KV cache needs at least one block of at least one position");
  storage_.resize(size_t(n_blocks) * size_t(n_layer) * 2 * size_t(block_size) * size_t(kv_dim));
  free_.reserve(size_t(n_blocks));
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));  // hand out 0 first
}

std::optional<int32_t> KvPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.back();
  free_.pop_back();
  return b;
}

void KvPool::release(int32_t block) {
  TESSERA_CHECK(block >= 0 && block < n_blocks_);
  free_.push_back(block);
}

}  // namespace tessera
