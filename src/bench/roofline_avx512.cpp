// AVX-512 VNNI probe loop: the 256-bit vpdpbusd the AVX-512 matmul kernels issue (matmul_avx512.cpp).
#include <immintrin.h>

#include "bench/roofline_kernels.h"

namespace tessera::roofline {

int32_t int8_chains_vnni(int64_t iters) {
  // Latency 5, two per cycle on current cores: 12 named accumulators keep both ports busy (an array would
  // live in memory).
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2);
  __m256i a0 = _mm256_set1_epi32(0), a1 = _mm256_set1_epi32(1), a2 = _mm256_set1_epi32(2), a3 = _mm256_set1_epi32(3),
          a4 = _mm256_set1_epi32(4), a5 = _mm256_set1_epi32(5), a6 = _mm256_set1_epi32(6), a7 = _mm256_set1_epi32(7),
          a8 = _mm256_set1_epi32(8), a9 = _mm256_set1_epi32(9), a10 = _mm256_set1_epi32(10),
          a11 = _mm256_set1_epi32(11);
  static_assert(kInt8ChainsVnni == 12);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = _mm256_dpbusd_epi32(a0, u, s);
    a1 = _mm256_dpbusd_epi32(a1, u, s);
    a2 = _mm256_dpbusd_epi32(a2, u, s);
    a3 = _mm256_dpbusd_epi32(a3, u, s);
    a4 = _mm256_dpbusd_epi32(a4, u, s);
    a5 = _mm256_dpbusd_epi32(a5, u, s);
    a6 = _mm256_dpbusd_epi32(a6, u, s);
    a7 = _mm256_dpbusd_epi32(a7, u, s);
    a8 = _mm256_dpbusd_epi32(a8, u, s);
    a9 = _mm256_dpbusd_epi32(a9, u, s);
    a10 = _mm256_dpbusd_epi32(a10, u, s);
    a11 = _mm256_dpbusd_epi32(a11, u, s);
  }
  const __m256i sum = _mm256_add_epi32(
      _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
                       _mm256_add_epi32(_mm256_add_epi32(a4, a5), _mm256_add_epi32(a6, a7))),
      _mm256_add_epi32(_mm256_add_epi32(a8, a9), _mm256_add_epi32(a10, a11)));
  return _mm256_cvtsi256_si32(sum);
}

}  // namespace tessera::roofline
