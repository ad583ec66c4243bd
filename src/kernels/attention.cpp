// Attention dispatch and the reference: scores, softmax, weighted sum of values, one head at a time.
#include "kernels/attention.h"

#include <cstring>

#include "kernels/ops.h"
#include "kernels/ops_kernels.h"

namespace tessera {

void attend(const float* q, const KvBlocksView& kv, int64_t n_pos, const AttentionShape& shape, int64_t head_begin,
            int64_t head_end, float* scratch, float* out) {
  attend(q, kv, n_pos, shape, head_begin, head_end, scratch, out, active_isa());
}

void attend(const float* q, const KvBlocksView& kv, int64_t n_pos, const AttentionShape& shape, int64_t head_begin,
            int64_t head_end, float* scratch, float* out, Isa isa) {
  if (kernel_isa(isa < detected_isa() ? isa : detected_isa()) >= Isa::Avx2) {
    return kernels::avx2::attend(q, kv.k_blocks, kv.v_blocks, kv.block_size, n_pos, shape.n_head, shape.n_head_kv,
                                 shape.head_dim, shape.scale, head_begin, head_end, scratch, out);
  }
  const int64_t group = shape.n_head / shape.n_head_kv;
  const int64_t kv_row = shape.n_head_kv * shape.head_dim;
  for (int64_t h = head_begin; h < head_end; ++h) {
    const float* qh = q + h * shape.head_dim;
    const int64_t kv_offset = (h / group) * shape.head_dim;
    for (int64_t p = 0; p < n_pos; ++p) {
      const float* k = kv.k_blocks[p / kv.block_size] + (p % kv.block_size) * kv_row + kv_offset;
      float dot = 0.0f;
      for (int64_t i = 0; i < shape.head_dim; ++i) dot += qh[i] * k[i];
      scratch[p] = dot * shape.scale;
    }
    softmax(scratch, n_pos, Isa::Scalar);
    float* oh = out + h * shape.head_dim;
    std::memset(oh, 0, static_cast<size_t>(shape.head_dim) * sizeof(float));
    for (int64_t p = 0; p < n_pos; ++p) {
      const float* v = kv.v_blocks[p / kv.block_size] + (p % kv.block_size) * kv_row + kv_offset;
      const float w = scratch[p];
      for (int64_t i = 0; i < shape.head_dim; ++i) oh[i] += w * v[i];
    }
  }
}

}  // namespace tessera
