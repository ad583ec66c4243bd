// The KV cache's memory: fixed-size blocks, each holding `block_size` token positions of keys and values for
// every layer, in the storage type chosen at start (F16 by default; F32, BF16, INT8 or FP8 with per-(token,
// head) scales). Storage only; which block belongs to whom is the BlockManager's business.
#pragma once

#include <cstdint>

#include "core/check.h"
#include "core/huge_pages.h"
#include "core/kv_type.h"

namespace tessera {

class KvPool {
 public:
  KvPool(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t n_blocks, int64_t block_size,
         KvType type = KvType::F16);

  // Bytes one block takes for all layers, without allocating (for sizing the pool from a memory budget).
  static uint64_t block_bytes(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t block_size, KvType type);

  KvType type() const { return type_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  uint64_t bytes_per_token() const { return uint64_t(n_layer_) * 2 * uint64_t(token_bytes_); }
  uint64_t bytes_per_block() const { return bytes_per_token() * uint64_t(block_size_); }
  uint64_t total_bytes() const { return storage_.size(); }

  // Writes one token's keys and values (n_head_kv * head_dim floats each) at `slot` of `block` for `layer`.
  void store(int32_t block, int64_t layer, int64_t slot, const float* k, const float* v);

  // The K / V region of `block` for `layer`: block_size rows, then (quantized types) the rows' scales at
  // scales_offset(). These are what KvBlocksView points at.
  const uint8_t* keys(int32_t block, int64_t layer) const { return storage_.data() + offset(block, layer, 0); }
  const uint8_t* values(int32_t block, int64_t layer) const { return storage_.data() + offset(block, layer, 1); }
  int64_t scales_offset() const { return block_size_ * row_bytes_; }

  // Copies the first n_positions positions of every layer (copy-on-write of a shared partial block).
  void copy_block(int32_t from, int32_t to, int64_t n_positions);

 private:
  size_t offset(int32_t block, int64_t layer, int kv) const {
    TESSERA_DCHECK(block >= 0 && block < n_blocks_);
    return ((size_t(block) * size_t(n_layer_) + size_t(layer)) * 2 + size_t(kv)) * size_t(region_bytes_);
  }

  int64_t n_layer_, n_head_kv_, head_dim_, n_blocks_, block_size_;
  KvType type_;
  int64_t row_bytes_;     // one token's elements for one layer, K or V
  int64_t token_bytes_;   // row_bytes_ plus its scales
  int64_t region_bytes_;  // block_size_ * token_bytes_: one block's K (or V) for one layer
  // Resident only as blocks are written: a pool sized for every sequence at full length costs nothing up front.
  AnonymousMemory storage_;
};

}  // namespace tessera
