// AVX-512 element-wise kernels: rms_norm, swiglu, softmax and the residual add, 16 lanes wide. Row tails use
// masked loads and stores, which AVX-512 does at full speed (AVX2's vmaskmov stores are slow on AMD cores).
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdint>

#include "kernels/ops_kernels.h"

namespace tessera::kernels::avx512 {
namespace {
#include "kernels/simd_math_avx512_inl.h"

inline __mmask16 tail(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

}  // namespace

void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
    acc1 = _mm512_fmadd_ps(b, b, acc1);
  }
  for (; i < n; i += 16) {
    const __m512 a = _mm512_maskz_loadu_ps(tail(n - i), x + i);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
  }
  const float sum_sq = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  const __m512 scale = _mm512_set1_ps(1.0f / __builtin_sqrtf(sum_sq / static_cast<float>(n) + eps));
  for (i = 0; i < n; i += 16) {
    const __mmask16 m = tail(n - i);
    const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), scale), _mm512_maskz_loadu_ps(m, weight + i));
    _mm512_mask_storeu_ps(out + i, m, v);
  }
}

void softmax(float* x, int64_t n) {
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (int64_t i = 0; i < n; i += 16) vmax = _mm512_mask_max_ps(vmax, tail(n - i), vmax, _mm512_maskz_loadu_ps(tail(n - i), x + i));
  const __m512 max_value = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail(n - i);
    const __m512 e = _mm512_maskz_mov_ps(m, exp_zmm(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max_value)));
    _mm512_mask_storeu_ps(x + i, m, e);
    sum = _mm512_add_ps(sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, exp_zmm(_mm512_sub_ps(zero, g))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

}  // namespace tessera::kernels::avx512
