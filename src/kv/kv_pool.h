// The KV cache's memory: fixed-size blocks, each holding `block_size` token positions of keys and values for
// every layer. Storage only; which block belongs to whom is the BlockManager's business.
#pragma once

#include <cstdint>
#include <vector>

#include "core/check.h"

namespace tessera {

class KvPool {
 public:
  // n_blocks blocks of block_size positions; each position holds kv_dim floats of K and of V per layer.
  KvPool(int64_t n_layer, int64_t kv_dim, int64_t n_blocks, int64_t block_size);

  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  uint64_t bytes_per_token() const { return uint64_t(n_layer_) * 2 * uint64_t(kv_dim_) * sizeof(float); }
  uint64_t bytes_per_block() const { return bytes_per_token() * uint64_t(block_size_); }
  uint64_t total_bytes() const { return storage_.size() * sizeof(float); }

  // [block_size, kv_dim] keys / values of `block` for `layer`.
  float* keys(int32_t block, int64_t layer) { return storage_.data() + offset(block, layer, 0); }
  float* values(int32_t block, int64_t layer) { return storage_.data() + offset(block, layer, 1); }

  // Copies the first n_positions positions of every layer (copy-on-write of a shared partial block).
  void copy_block(int32_t from, int32_t to, int64_t n_positions);

 private:
  size_t offset(int32_t block, int64_t layer, int kv) const {
    TESSERA_DCHECK(block >= 0 && block < n_blocks_);
    return ((size_t(block) * size_t(n_layer_) + size_t(layer)) * 2 + size_t(kv)) * size_t(block_size_ * kv_dim_);
  }

  int64_t n_layer_, kv_dim_, n_blocks_, block_size_;
  std::vector<float> storage_;
};

}  // namespace tessera
