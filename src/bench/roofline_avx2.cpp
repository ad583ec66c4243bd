// AVX2 + FMA probe loops.
#include <immintrin.h>

#include "bench/roofline_kernels.h"
#include "kernels/static_for.h"

namespace tessera::roofline {

using kernels::static_for;

uint64_t read_sum_avx2(const uint8_t* p, size_t n) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < n; i += 128) {
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

float fma_chains_avx2(int64_t iters) {
  // a ← a·b + c converges to c / (1 − b) = 0.1: no overflow, no denormals, whatever iters is. Twelve named
  // accumulators (not an array, which GCC keeps in memory) cover two FMA ports × latency 4-5 with room to spare.
  const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-4f);
  __m256 a0 = _mm256_set1_ps(0.0f), a1 = _mm256_set1_ps(1.0f), a2 = _mm256_set1_ps(2.0f), a3 = _mm256_set1_ps(3.0f),
         a4 = _mm256_set1_ps(4.0f), a5 = _mm256_set1_ps(5.0f), a6 = _mm256_set1_ps(6.0f), a7 = _mm256_set1_ps(7.0f),
         a8 = _mm256_set1_ps(8.0f), a9 = _mm256_set1_ps(9.0f), a10 = _mm256_set1_ps(10.0f),
         a11 = _mm256_set1_ps(11.0f);
  static_assert(kFmaChains == 12);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = _mm256_fmadd_ps(a0, b, c);
    a1 = _mm256_fmadd_ps(a1, b, c);
    a2 = _mm256_fmadd_ps(a2, b, c);
    a3 = _mm256_fmadd_ps(a3, b, c);
    a4 = _mm256_fmadd_ps(a4, b, c);
    a5 = _mm256_fmadd_ps(a5, b, c);
    a6 = _mm256_fmadd_ps(a6, b, c);
    a7 = _mm256_fmadd_ps(a7, b, c);
    a8 = _mm256_fmadd_ps(a8, b, c);
    a9 = _mm256_fmadd_ps(a9, b, c);
    a10 = _mm256_fmadd_ps(a10, b, c);
    a11 = _mm256_fmadd_ps(a11, b, c);
  }
  const __m256 s = _mm256_add_ps(
      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                    _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))),
      _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  return _mm256_cvtss_f32(s);
}

int32_t int8_chains_avx2(int64_t iters) {
  // The kernels' byte dot product (YmmAvx2, kernels/matmul_ymm_inl.h): maddubs into int16 pairs, madd by one
  // into int32.
  __m256i u = _mm256_set1_epi8(3);
  const __m256i s0 = _mm256_set1_epi8(-2), s1 = _mm256_set1_epi8(5), s2 = _mm256_set1_epi8(7),
                s3 = _mm256_set1_epi8(-9);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  static_assert(kInt8ChainsAvx2 == 4);
  for (int64_t i = 0; i < iters; ++i) {
    // The operands never change; this empty asm says u might, so the products are not hoisted out of the loop
    // (and with four different s they cannot be merged either).
    asm volatile("" : "+x"(u));
    a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s0), ones));
    a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s1), ones));
    a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s2), ones));
    a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s3), ones));
  }
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3));
  return _mm256_cvtsi256_si32(s);
}

int32_t int8_product_chains_avx2(int64_t iters) {
  // vpmaddubsw alone: each chain adds its int16 pair sums with a wrapping 16-bit add (one cycle of latency, so
  // eight chains keep both multiply pipes fed).
  __m256i u = _mm256_set1_epi8(3);
  __m256i s[kInt8ProductChainsAvx2], a[kInt8ProductChainsAvx2];
  for (int k = 0; k < kInt8ProductChainsAvx2; ++k) {
    s[k] = _mm256_set1_epi8(static_cast<char>(2 * k - 7));
    a[k] = _mm256_setzero_si256();
  }
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile("" : "+x"(u));  // as in int8_chains_avx2: keeps the products inside the loop
    static_for<kInt8ProductChainsAvx2>([&](auto k) { a[k] = _mm256_add_epi16(a[k], _mm256_maddubs_epi16(u, s[k])); });
  }
  __m256i sum = a[0];
  for (int k = 1; k < kInt8ProductChainsAvx2; ++k) sum = _mm256_add_epi16(sum, a[k]);
  return _mm256_cvtsi256_si32(sum);
}

}  // namespace tessera::roofline
