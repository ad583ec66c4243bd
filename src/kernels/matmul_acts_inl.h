// Activation quantization for the integer matmul kernels (int8 with a scale per block of 32 values, per 256-value
// super-block or per token: matmul_kernels.h's ActBlocks), the same code at both x86 levels
// (matmul_acts_avx2.cpp, matmul_acts_avx512.cpp). Anonymous namespace, for the reason matmul_ymm_inl.h gives.
#pragma once

#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels {
namespace {

// Rounds 32 floats times `mul` to nearest-even int8 and returns them in order, with the four int32 vectors in i[]
// for sums. Finite products lie in [-127, 127] already; a NaN (or an infinity times a zero multiplier) converts to
// INT_MIN, clamped to -127 so that the bytes and the sums agree and no byte is -128, which the AVX2 sign trick
// cannot negate (a token with a NaN then gave one result alone and another in a batch).
inline __m256i quantize32(const float* x, __m256 mul, __m256i i[4]) {
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  UNROLL
  for (int k = 0; k < 4; ++k) {
    const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), mul));
    i[k] = _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
  }
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
  // packs works per 128-bit lane: restore element order (dwords 0,4,1,5,2,6,3,7).
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// ---- activation quantization --------------------------------------------------------------------------------

// The scale of a block whose largest magnitude is amax, and the multiplier that quantizes it. Scales below the
// smallest normal float would give an infinite inverse, whose products convert to INT_MIN and saturate to -128
// in the bytes but not in the sums (the 512-bit tiles read both): such blocks quantize to zeros.
struct BlockScale {
  float d, inv;
};
inline BlockScale block_scale(float amax) {
  const float d = amax / 127.0f;
  return {d, d >= 0x1p-126f ? 1.0f / d : 0.0f};
}

inline float amax_of(const float* x, int64_t n) {  // n a multiple of 32
  __m256 vmax = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) vmax = _mm256_max_ps(vmax, abs_ps(_mm256_loadu_ps(x + i)));
  return hmax(vmax);
}

// One token in one scale per row (I8): q, q_abs, scale[0] and row_sum[0].
inline void quantize_row(const float* xt, int64_t n_in, int8_t* qt, int8_t* at, float* scale, int32_t* row_sum) {
  __m256i iv[4];
  __m256 vmax = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n_in; i += 8) vmax = _mm256_max_ps(vmax, abs_ps(_mm256_loadu_ps(xt + i)));
  float amax = hmax(vmax);
  for (; i < n_in; ++i) amax = max_f(amax, __builtin_fabsf(xt[i]));
  const BlockScale s = block_scale(amax);
  const __m256 mul = _mm256_set1_ps(s.inv);
  __m256i sum = _mm256_setzero_si256();
  for (i = 0; i + 32 <= n_in; i += 32) {
    const __m256i qv = quantize32(xt + i, mul, iv);
    _mm256_storeu_si256((__m256i*)(qt + i), qv);
    _mm256_storeu_si256((__m256i*)(at + i), _mm256_abs_epi8(qv));
    sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3])));
  }
  int32_t total = hsum_epi32(sum);
  for (; i < n_in; ++i) {
    const int32_t v = _mm_cvtss_si32(_mm_set_ss(xt[i] * s.inv));
    qt[i] = static_cast<int8_t>(v < -127 ? -127 : v > 127 ? 127 : v);  // as quantize32 clamps
    at[i] = static_cast<int8_t>(qt[i] < 0 ? -qt[i] : qt[i]);
    total += qt[i];
  }
  *scale = s.d;
  *row_sum = total;
}

// Quantizes 32 values at xb times `mul` into qb, with their two 16-value sums; |q| into ab unless it is null.
inline void quantize_block32(const float* xb, __m256 mul, int8_t* qb, int8_t* ab, int16_t sums[2]) {
  __m256i iv[4];
  const __m256i qv = quantize32(xb, mul, iv);
  _mm256_storeu_si256((__m256i*)qb, qv);
  if (ab != nullptr) _mm256_storeu_si256((__m256i*)ab, _mm256_abs_epi8(qv));
  sums[0] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(iv[0], iv[1])));
  sums[1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(iv[2], iv[3])));
}

inline void quantize_acts_impl(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, ActBlocks blocks,
                               int8_t* q, int8_t* q_abs, float* scale, int16_t* sum16, int16_t* sum32,
                               int32_t* row_sum) {
  const int64_t nb = n_in / 32;
  for (int64_t t = t_begin; t < t_end; ++t) {
    const float* xt = x + t * n_in;
    int8_t* qt = q + t * n_in;
    if (blocks == ActBlocks::PerRow) {
      quantize_row(xt, n_in, qt, q_abs + t * n_in, scale + t, row_sum + t);
      continue;
    }
    if (blocks == ActBlocks::Block32) {
      int8_t* at = q_abs + t * n_in;
      int16_t* s16 = sum16 + t * nb * 2;
      for (int64_t b = 0; b < nb; ++b) {
        const BlockScale s = block_scale(amax_of(xt + b * 32, 32));
        quantize_block32(xt + b * 32, _mm256_set1_ps(s.inv), qt + b * 32, at + b * 32, s16 + 2 * b);
        scale[t * nb + b] = s.d;
      }
      continue;
    }
    const int64_t nsb = n_in / 256;  // Block256: n_in is a multiple of 256 (Q4_K's super-block)
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const BlockScale s = block_scale(amax_of(xt + sb * 256, 256));
      const __m256 mul = _mm256_set1_ps(s.inv);
      for (int64_t b = sb * 8; b < sb * 8 + 8; ++b) {
        int16_t halves[2];
        quantize_block32(xt + b * 32, mul, qt + b * 32, nullptr, halves);
        sum32[t * nb + b] = static_cast<int16_t>(halves[0] + halves[1]);
      }
      scale[t * nsb + sb] = s.d;
    }
  }
}

}  // namespace
}  // namespace tessera::kernels
