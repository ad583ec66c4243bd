// The KV cache's memory: a pool of fixed-size blocks, each holding `block_size` token positions of keys and
// values for every layer. Sequences own blocks through block tables; this class only stores and hands them out.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/check.h"

namespace tessera {

class KvPool {
 public:
  // n_blocks blocks of block_size positions, each position kv_dim floats of K and of V per layer.
  KvPool(int64_t n_layer, int64_t kv_dim, int64_t n_blocks, int64_t block_size);

  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t n_free() const { return static_cast<int64_t>(free_.size()); }
  uint64_t bytes_per_token() const { return uint64_t(n_layer_) * 2 * kv_dim_ * sizeof(float); }
  uint64_t total_bytes() const { return storage_.size() * sizeof(float); }

  // A free block id, or nothing when the pool is exhausted (callers preempt or reject; never an error).
  std::optional<int32_t> allocate();
  void release(int32_t block);

  // [block_size, kv_dim] keys / values of `block` for `layer`.
  float* keys(int32_t block, int64_t layer) { return storage_.data() + offset(block, layer, 0); }
  float* values(int32_t block, int64_t layer) { return storage_.data() + offset(block, layer, 1); }

 private:
  size_t offset(int32_t block, int64_t layer, int kv) const {
    TESSERA_DCHECK(block >= 0 && block < n_blocks_);
    return ((size_t(block) * size_t(n_layer_) + size_t(layer)) * 2 + size_t(kv)) * size_t(block_size_ * kv_dim_);
  }

  int64_t n_layer_, kv_dim_, n_blocks_, block_size_;
  std::vector<float> storage_;
  std::vector<int32_t> free_;  // stack of free block ids
};

}  // namespace tessera
