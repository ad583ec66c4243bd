// Activation quantization for the integer matmul kernels (int8 blocks of 32 with their scales and sums, or one
// scale per token for I8), the same code at both x86 levels (matmul_acts_avx2.cpp, matmul_acts_avx512.cpp).
// Anonymous namespace, for the reason matmul_ymm_inl.h gives.
#pragma once

#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels {
namespace {

// Rounds 32 floats times `mul` to nearest-even int8 (values must lie in [-127, 127]) and returns them in order,
// with the four int32 vectors in i[] for sums.
inline __m256i quantize32(const float* x, __m256 mul, __m256i i[4]) {
  UNROLL
  for (int k = 0; k < 4; ++k) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), mul));
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
  // packs works per 128-bit lane: restore element order (dwords 0,4,1,5,2,6,3,7).
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// ---- activation quantization --------------------------------------------------------------------------------

inline void quantize_acts_impl(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, bool per_row, int8_t* q,
                        int8_t* q_abs, float* scale, float* block_sum, int16_t* sum16, int32_t* row_sum) {
  const int64_t nb = n_in / 32;
  for (int64_t t = t_begin; t < t_end; ++t) {
    const float* xt = x + t * n_in;
    int8_t* qt = q + t * n_in;
    int8_t* at = q_abs + t * n_in;
    __m256i iv[4];
    if (per_row) {
      __m256 vmax = _mm256_setzero_ps();
      int64_t i = 0;
      for (; i + 8 <= n_in; i += 8) vmax = _mm256_max_ps(vmax, abs_ps(_mm256_loadu_ps(xt + i)));
      float amax = hmax(vmax);
      for (; i < n_in; ++i) amax = max_f(amax, __builtin_fabsf(xt[i]));
      const float d = amax / 127.0f;
      // Scales below the smallest normal float would give an infinite inverse, whose products convert to
      // INT_MIN and saturate to -128 in the bytes but not in the sums (the 512-bit tiles read both).
      const float inv = d >= 0x1p-126f ? 1.0f / d : 0.0f;
      const __m256 mul = _mm256_set1_ps(inv);
      __m256i sum = _mm256_setzero_si256();
      for (i = 0; i + 32 <= n_in; i += 32) {
        const __m256i qv = quantize32(xt + i, mul, iv);
        _mm256_storeu_si256((__m256i*)(qt + i), qv);
        _mm256_storeu_si256((__m256i*)(at + i), _mm256_abs_epi8(qv));
        sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3])));
      }
      int32_t total = hsum_epi32(sum);
      for (; i < n_in; ++i) {
        qt[i] = static_cast<int8_t>(_mm_cvtss_si32(_mm_set_ss(xt[i] * inv)));
        at[i] = static_cast<int8_t>(qt[i] < 0 ? -qt[i] : qt[i]);
        total += qt[i];
      }
      scale[t] = d;
      row_sum[t] = total;
      continue;
    }
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = xt + b * 32;
      __m256 vmax = abs_ps(_mm256_loadu_ps(xb));
      for (int k = 1; k < 4; ++k) vmax = _mm256_max_ps(vmax, abs_ps(_mm256_loadu_ps(xb + 8 * k)));
      const float amax = hmax(vmax);
      const float d = amax / 127.0f;
      // Scales below the smallest normal float would give an infinite inverse, whose products convert to
      // INT_MIN and saturate to -128 in the bytes but not in the sums (the 512-bit tiles read both).
      const float inv = d >= 0x1p-126f ? 1.0f / d : 0.0f;
      const __m256i qv = quantize32(xb, _mm256_set1_ps(inv), iv);
      _mm256_storeu_si256((__m256i*)(qt + b * 32), qv);
      _mm256_storeu_si256((__m256i*)(at + b * 32), _mm256_abs_epi8(qv));
      const int32_t s0 = hsum_epi32(_mm256_add_epi32(iv[0], iv[1]));
      const int32_t s1 = hsum_epi32(_mm256_add_epi32(iv[2], iv[3]));
      scale[t * nb + b] = d;
      block_sum[t * nb + b] = d * static_cast<float>(s0 + s1);
      sum16[t * nb * 2 + 2 * b] = static_cast<int16_t>(s0);
      sum16[t * nb * 2 + 2 * b + 1] = static_cast<int16_t>(s1);
    }
  }
}

}  // namespace
}  // namespace tessera::kernels
