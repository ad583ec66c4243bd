// AVX2 + FMA element-wise kernels: rms_norm, rope rotation, softmax, swiglu. Row tails use masked loads, so
// every element goes through the same vector code.
#include <immintrin.h>

#include <cstdint>

#include "kernels/hsum_ymm_inl.h"
#include "kernels/ops_kernels.h"

namespace tessera::kernels::avx2 {
namespace {
#include "kernels/simd_math_avx2_inl.h"
}  // namespace

void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    acc0 = _mm256_fmadd_ps(a, a, acc0);
    acc1 = _mm256_fmadd_ps(b, b, acc1);
  }
  for (; i < n; i += 8) {
    const __m256 a = _mm256_maskload_ps(x + i, tail_mask(n - i));
    acc0 = _mm256_fmadd_ps(a, a, acc0);
  }
  const float sum_sq = hsum(_mm256_add_ps(acc0, acc1));
  const __m256 scale = _mm256_set1_ps(1.0f / __builtin_sqrtf(sum_sq / static_cast<float>(n) + eps));
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), scale), _mm256_loadu_ps(weight + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(x + i, m), scale), _mm256_maskload_ps(weight + i, m));
    _mm256_maskstore_ps(out + i, m, v);
  }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin, bool neox) {
  const int64_t half = head_dim / 2;
  if (neox) {
    for (int64_t h = 0; h < n_heads; ++h) {
      float* a = x + h * head_dim;
      float* b = a + half;
      for (int64_t i = 0; i < half; i += 8) {
        const __m256i m = tail_mask(half - i);
        const __m256 c = _mm256_maskload_ps(cos + i, m), s = _mm256_maskload_ps(sin + i, m);
        const __m256 x0 = _mm256_maskload_ps(a + i, m), x1 = _mm256_maskload_ps(b + i, m);
        _mm256_maskstore_ps(a + i, m, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
        _mm256_maskstore_ps(b + i, m, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
      }
    }
    return;
  }
  // Interleaved pairs: 8 floats hold 4 pairs; cos/sin are widened to [c0 c0 c1 c1 ...] and [-s0 s0 -s1 s1 ...].
  const __m256 sign = _mm256_setr_ps(-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f);
  const __m256i widen = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  for (int64_t i = 0; i < half; i += 4) {
    const int64_t left = half - i;
    const __m256i m4 = tail_mask(left < 4 ? left : 4);
    const __m256 c = _mm256_permutevar8x32_ps(_mm256_maskload_ps(cos + i, m4), widen);
    const __m256 s = _mm256_mul_ps(_mm256_permutevar8x32_ps(_mm256_maskload_ps(sin + i, m4), widen), sign);
    const __m256i m = tail_mask(2 * (left < 4 ? left : 4));
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim + 2 * i;
      const __m256 xv = _mm256_maskload_ps(v, m);
      const __m256 swapped = _mm256_permute_ps(xv, 0xb1);  // (x1, x0) per pair
      _mm256_maskstore_ps(v, m, _mm256_fmadd_ps(xv, c, _mm256_mul_ps(swapped, s)));
    }
  }
}

void softmax(float* x, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 vmax = neg_inf;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m)));
  }
  const __m256 max_value = _mm256_set1_ps(hmax_ps(vmax));
  __m256 sum = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), max_value));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), max_value)),
                                   _mm256_castsi256_ps(m));
    _mm256_maskstore_ps(x + i, m, e);
    sum = _mm256_add_ps(sum, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / hsum(sum));
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), inv));
  }
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp_ps(_mm256_sub_ps(zero, g))));
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(silu, _mm256_maskload_ps(up + i, m)));
  }
}

void add(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) x[i] += y[i];
}

}  // namespace tessera::kernels::avx2
