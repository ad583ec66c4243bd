// A panel's 32 rows as bf16 pairs unpacked from two of its slices (k and k + 1: vpunpcklwd and vpunpckhwd of
// 64 bytes each) lie in two registers in the lane order {0-3, 8-11, 16-19, 24-27} and {4-7, 12-15, 20-23, 28-31}:
// the sums of products with them come in that order too (matmul_bf16_avx512.cpp's vdpbf16ps, matmul_bf16_amx.cpp's
// tile columns). These exact moves put them in row order and back. For files compiled with AVX-512 only.
#pragma once

#include <immintrin.h>

#include "kernels/static_for.h"

namespace tessera::kernels {
// An anonymous namespace, as the kernels' other shared headers: each ISA file compiles its own copy.
namespace {

// Rows 0-15 and 16-31 of a panel from the sums in pair-lane order, and back.
TESSERA_INLINE inline void to_rows(__m512 lo, __m512 hi, __m512& rows0, __m512& rows1) {
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  rows0 = _mm512_permutex2var_ps(lo, first, hi);
  rows1 = _mm512_permutex2var_ps(lo, second, hi);
}
TESSERA_INLINE inline void from_rows(__m512 rows0, __m512 rows1, __m512& lo, __m512& hi) {
  const __m512i low = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
  const __m512i high = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  lo = _mm512_permutex2var_ps(rows0, low, rows1);
  hi = _mm512_permutex2var_ps(rows0, high, rows1);
}

}  // namespace
}  // namespace tessera::kernels
