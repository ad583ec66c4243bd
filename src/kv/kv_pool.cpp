// Block storage: per (block, layer), a K region then a V region, each [block_size rows][block_size scale rows].
#include "kv/kv_pool.h"

#include <cstring>

#include "core/error.h"
#include "kernels/attention.h"

namespace tessera {

uint64_t KvPool::block_bytes(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t block_size, KvType type) {
  const int64_t token = n_head_kv * head_dim * kv_element_bytes(type) + (kv_type_has_scales(type) ? n_head_kv * 4 : 0);
  return uint64_t(n_layer) * 2 * uint64_t(token) * uint64_t(block_size);
}

KvPool::KvPool(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t n_blocks, int64_t block_size, KvType type)
    : n_layer_(n_layer),
      n_head_kv_(n_head_kv),
      head_dim_(head_dim),
      n_blocks_(n_blocks),
      block_size_(block_size),
      type_(type),
      row_bytes_(n_head_kv * head_dim * kv_element_bytes(type)),
      token_bytes_(row_bytes_ + (kv_type_has_scales(type) ? n_head_kv * int64_t(sizeof(float)) : 0)),
      region_bytes_(block_size * token_bytes_) {
  if (n_blocks <= 0 || block_size <= 0) fail("the KV cache needs at least one block of at least one position");
  storage_ = AnonymousMemory(size_t(n_blocks) * size_t(n_layer) * 2 * size_t(region_bytes_));
}

void KvPool::store(int32_t block, int64_t layer, int64_t slot, const float* k, const float* v) {
  for (int kv = 0; kv < 2; ++kv) {
    uint8_t* region = storage_.data() + offset(block, layer, kv);
    auto* scales = reinterpret_cast<float*>(region + scales_offset()) + slot * n_head_kv_;
    encode_kv_row(type_, kv == 0 ? k : v, n_head_kv_, head_dim_, region + slot * row_bytes_, scales);
  }
}

void KvPool::copy_block(int32_t from, int32_t to, int64_t n_positions) {
  for (int64_t l = 0; l < n_layer_; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      const uint8_t* src = storage_.data() + offset(from, l, kv);
      uint8_t* dst = storage_.data() + offset(to, l, kv);
      std::memcpy(dst, src, size_t(n_positions * row_bytes_));
      if (kv_type_has_scales(type_)) {
        std::memcpy(dst + scales_offset(), src + scales_offset(), size_t(n_positions * n_head_kv_) * sizeof(float));
      }
    }
  }
}

}  // namespace tessera
