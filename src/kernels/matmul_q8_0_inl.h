// Q8_0 tiles on 256-bit registers, for both x86 levels (matmul_q8_0_avx2.cpp, matmul_q8_0_avx512.cpp): rows
// through the 32-value block tile (matmul_block32_inl.h), Q8_0x8 (interleaved groups of 8 rows) one group or two
// at a time. Anonymous namespace, for the reason matmul_ymm_inl.h gives.
#pragma once

#include "kernels/matmul_block32_inl.h"
#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels {
namespace {

// Q8_0x8 (kernels/interleave.h), one group of 8 rows for NT tokens, the same scheme as Q4_0x8 with signed
// weights: vector Vj holds values 4j..4j+3 of the 8 rows, multiplied (s32_products) with those 4 activation
// bytes broadcast. A pair sum can reach 2·127·127, so each product widens to int32 at once (vpmaddwd by 1)
// before the eight add up.
template <int NT>
__attribute__((noinline, flatten)) void tile_q8_0x8(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 272;  // 8 fp16 scales + 8 × 32 bytes
  const int64_t nb = a.n_in / 32;
  const TileActs<NT> x(a, t0);
  __m256 acc[NT];
  static_for<NT>([&](auto t) { acc[t] = _mm256_setzero_ps(); });
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group_block(a, group, b, kBlockBytes);
    __m256i s32[NT];
    static_for<NT>([&](auto t) { s32[t] = _mm256_setzero_si256(); });
    static_for<8>([&](auto j) {
      const __m256i v = _mm256_loadu_si256((const __m256i*)(blk + 16 + 32 * j));
      s32_products<NT>(v, x.q, x.q_abs, b * 32 + 4 * j, s32);
    });
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)blk));
    static_for<NT>([&](auto t) {
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[t]), _mm256_mul_ps(dw, _mm256_broadcast_ss(x.scale[t] + b)),
                               acc[t]);
    });
  }
  static_for<NT>([&](auto t) { _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + group * 8, acc[t]); });
}

// Q8_0x8 for groups `group` and `group + 1` at once (16 rows, NT tokens). Every element runs tile_q8_0x8's
// operations in the same order (the same int32 block sums, scale product and FMA), so the bits match whichever
// tile computes it.
template <int NT>
__attribute__((noinline, flatten)) void tile_q8_0x8_pair(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 272;
  const int64_t nb = a.n_in / 32;
  const TileActs<NT> x(a, t0);
  __m256 acc[2][NT];
  static_for<2>([&](auto g) { static_for<NT>([&](auto t) { acc[g][t] = _mm256_setzero_ps(); }); });
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk[2] = {group_block(a, group, b, kBlockBytes), group_block(a, group + 1, b, kBlockBytes)};
    __m256i s32[2][NT];
    static_for<2>([&](auto g) { static_for<NT>([&](auto t) { s32[g][t] = _mm256_setzero_si256(); }); });
    pair_block_products<NT>(blk, 16, x, b, s32);
    static_for<2>([&](auto g) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)blk[g]));
      static_for<NT>([&](auto t) {
        acc[g][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[g][t]),
                                    _mm256_mul_ps(dw, _mm256_broadcast_ss(x.scale[t] + b)), acc[g][t]);
      });
    });
  }
  static_for<2>([&](auto g) {
    static_for<NT>([&](auto t) { _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + (group + g) * 8, acc[g][t]); });
  });
}

// Q8_0x8 for interleaved_rows: a wide family (8-token single-group tiles, 4-token pair tiles).
struct Q8_0x8Family {
  static constexpr bool kPairs = true;
  static constexpr bool kWide = true;
  template <int NT>
  static void tile(const MatmulArgs& a, int64_t t0, int64_t group) { tile_q8_0x8<NT>(a, t0, group); }
  template <int NT>
  static void pair_tile(const MatmulArgs& a, int64_t t0, int64_t group) { tile_q8_0x8_pair<NT>(a, t0, group); }
};

// Q8_0 or Q8_0x8 rows [row_begin, row_end) on 256-bit tiles.
template <typename Isa>
void q8_0_rows_ymm(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.type == KernelType::Q8_0x8) return interleaved_rows<Q8_0x8Family>(a, row_begin, row_end);
  block32_rows<Isa, Q8_0Block>(a, row_begin, row_end);
}

}  // namespace
}  // namespace tessera::kernels
