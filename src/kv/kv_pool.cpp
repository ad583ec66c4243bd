// Block storage.
#include "kv/kv_pool.h"

#include <algorithm>

#include "core/error.h"

namespace tessera {

KvPool::KvPool(int64_t n_layer, int64_t kv_dim, int64_t n_blocks, int64_t block_size)
    : n_layer_(n_layer), kv_dim_(kv_dim), n_blocks_(n_blocks), block_size_(block_size) {
  if (n_blocks <= 0 || block_size <= 0) fail("the KV cache needs at least one block of at least one position");
  storage_.resize(size_t(n_blocks) * size_t(n_layer) * 2 * size_t(block_size) * size_t(kv_dim));
}

void KvPool::copy_block(int32_t from, int32_t to, int64_t n_positions) {
  for (int64_t l = 0; l < n_layer_; ++l) {
    std::copy_n(keys(from, l), n_positions * kv_dim_, keys(to, l));
    std::copy_n(values(from, l), n_positions * kv_dim_, values(to, l));
  }
}

}  // namespace tessera
