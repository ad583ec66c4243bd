// AVX2 attention over block tables: vector dot products for the scores, the vector softmax, and FMA
// accumulation of the values, one query head at a time.
#include <immintrin.h>

#include <cstdint>

#include "kernels/ops_kernels.h"

namespace tessera::kernels::avx2 {
namespace {
#include "kernels/simd_math_avx2_inl.h"

inline float dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    acc0 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), acc0);
  }
  return hsum_ps(_mm256_add_ps(acc0, acc1));
}

}  // namespace

void attend(const float* q, const float* const* k_blocks, const float* const* v_blocks, int64_t block_size,
            int64_t n_pos, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, int64_t head_begin,
            int64_t head_end, float* scratch, float* out) {
  const int64_t group = n_head / n_head_kv;
  const int64_t kv_row = n_head_kv * head_dim;
  for (int64_t h = head_begin; h < head_end; ++h) {
    const float* qh = q + h * head_dim;
    const int64_t kv_offset = (h / group) * head_dim;
    for (int64_t p = 0; p < n_pos; ++p) {
      const float* k = k_blocks[p / block_size] + (p % block_size) * kv_row + kv_offset;
      scratch[p] = dot(qh, k, head_dim) * scale;
    }
    softmax(scratch, n_pos);
    float* oh = out + h * head_dim;
    // Accumulate the output in registers when the head fits (head_dim ≤ 256: 32 accumulators would spill, but
    // the loads then hit L1), otherwise in memory.
    for (int64_t i0 = 0; i0 < head_dim; i0 += 64) {
      const int64_t width = head_dim - i0 < 64 ? head_dim - i0 : 64;
      __m256 acc[8];
      __m256i mask[8];
      const int nv = static_cast<int>((width + 7) / 8);
      for (int j = 0; j < nv; ++j) {
        acc[j] = _mm256_setzero_ps();
        mask[j] = tail_mask(width - 8 * j);
      }
      for (int64_t p = 0; p < n_pos; ++p) {
        const float* v = v_blocks[p / block_size] + (p % block_size) * kv_row + kv_offset + i0;
        const __m256 w = _mm256_set1_ps(scratch[p]);
        for (int j = 0; j < nv; ++j) acc[j] = _mm256_fmadd_ps(w, _mm256_maskload_ps(v + 8 * j, mask[j]), acc[j]);
      }
      for (int j = 0; j < nv; ++j) _mm256_maskstore_ps(oh + i0 + 8 * j, mask[j], acc[j]);
    }
  }
}

}  // namespace tessera::kernels::avx2
