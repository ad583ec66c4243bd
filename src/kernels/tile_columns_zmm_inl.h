// The tiles' order (tile_order.h) written a whole tile of tokens at a time on zmm: the tile's rows of 16 values
// turned into 16 runs of tile-width words by a 16 x 16 transposition in registers. In that order the runs of
// consecutive values follow one another, so each is one masked store. Writing each token's values at the tile's
// stride instead (a masked scatter, or one store per value) took 2.0 % of a BF16 prefill's samples for the bf16
// rounding and 1.4 % of an F16 prefill's for the float packing, against 1.1 % and 0.7 % this way (Zen 4, a
// 649-token prompt, samples outside model loading). The AVX2 panels keep one store per value.
// For the *_avx512.cpp kernel files only (tile_columns_avx512.cpp makes it a call for its test); anonymous
// namespace, for the reason matmul_ymm_inl.h gives.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/static_for.h"

namespace tessera::kernels {
namespace {

// Rows r[0..15] of 16 words into columns: r[j] becomes (r[0][j], r[1][j], ..., r[15][j]). Unrolled by static_for
// so that both arrays stay in registers (with plain loops GCC kept them on the stack, every stage loading and
// storing them).
TESSERA_INLINE inline void transpose_16x16(__m512i (&r)[16]) {
  __m512i a[16];
  static_for<8>([&](auto h) TESSERA_INLINE {  // 2 x 2 blocks of words
    constexpr int i = 2 * decltype(h)::value;
    a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  });
  static_for<4>([&](auto q) TESSERA_INLINE {  // 4 x 4 blocks of words within each 128-bit lane
    constexpr int i = 4 * decltype(q)::value;
    r[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
  });
  static_for<4>([&](auto c) TESSERA_INLINE {  // 128-bit lanes: rows 0-3 with 4-7, 8-11 with 12-15
    constexpr int i = decltype(c)::value;
    a[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    a[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
    a[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    a[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
  });
  static_for<4>([&](auto c) TESSERA_INLINE {  // 256-bit halves: rows 0-7 with 8-15
    constexpr int i = decltype(c)::value;
    r[i] = _mm512_shuffle_i32x4(a[i], a[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(a[i], a[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_i32x4(a[i + 4], a[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_i32x4(a[i + 4], a[i + 12], 0xdd);
  });
}

// A tile of nt ≤ 16 tokens, 16 values each from row(i) (token i of the tile), into n ≤ 16 runs of nt words at out:
// run j holds value j of every token, the tile's tokens side by side.
template <typename Row>
TESSERA_INLINE inline void store_tile_columns(int64_t nt, int64_t n, Row&& row, uint32_t* out) {
  __m512i r[16];
  static_for<16>([&](auto i) TESSERA_INLINE { r[i] = i < nt ? row(int64_t(i)) : _mm512_setzero_si512(); });
  transpose_16x16(r);
  const __mmask16 tokens = __mmask16((1u << nt) - 1);
  static_for<16>([&](auto j) TESSERA_INLINE {
    if (j < n) _mm512_mask_storeu_epi32(out + j * nt, tokens, r[j]);
  });
}

}  // namespace
}  // namespace tessera::kernels
