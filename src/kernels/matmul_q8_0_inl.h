// Q8_0 tiles on 256-bit registers, for both x86 levels (matmul_q8_0_avx2.cpp, matmul_q8_0_avx512.cpp): rows
// through the 32-value block tile (matmul_block32_inl.h), Q8_0x8 (interleaved groups of 8 rows) one group or two
// at a time. Anonymous namespace, for the reason matmul_ymm_inl.h gives.
#pragma once

#include "kernels/matmul_block32_inl.h"
#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels {
namespace {

// Q8_0x8 (kernels/interleave.h), NG groups of 8 rows (1, or 2 from `group`) for NT tokens, the same scheme as
// Q4_0x8 with signed weights: vector Vj holds values 4j..4j+3 of the 8 rows, multiplied (block_products) with
// those 4 activation bytes broadcast. A pair sum can reach 2·127·127, so each product widens to int32 at once
// (vpmaddwd by 1) before the eight add up. Every (group, token) element runs the same operations whatever NT and
// NG are (batch invariance).
template <int NT, int NG = 1>
__attribute__((noinline, flatten)) void tile_q8_0x8(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 272;  // 8 fp16 scales + 8 × 32 bytes
  const int64_t nb = a.n_in / 32;
  const TileActs<NT> x(a, t0);
  __m256 acc[NG][NT];
  static_for<NG>([&](auto g) { static_for<NT>([&](auto t) { acc[g][t] = _mm256_setzero_ps(); }); });
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk[NG];
    static_for<NG>([&](auto g) { blk[g] = group_block(a, group + g, b, kBlockBytes); });
    __m256i s32[NG][NT];
    static_for<NG>([&](auto g) { static_for<NT>([&](auto t) { s32[g][t] = _mm256_setzero_si256(); }); });
    block_products<NT, NG>(blk, 16, x, b, s32);
    static_for<NG>([&](auto g) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)blk[g]));
      static_for<NT>([&](auto t) {
        acc[g][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[g][t]),
                                    _mm256_mul_ps(dw, _mm256_broadcast_ss(x.scale[t] + b)), acc[g][t]);
      });
    });
  }
  static_for<NG>([&](auto g) {
    static_for<NT>([&](auto t) { _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + (group + g) * 8, acc[g][t]); });
  });
}

#ifdef TESSERA_YMM_VNNI
// Q8_0x8's one-token tile with VNNI: one group of 8 rows, so a thread's groups are read as one stream.
// Each block's sum is Σ (w + 128)·x − 128·Σx in int32 (w ^ 0x80 as vpdpbusd's unsigned operand, the chain
// starting at −128·Σx), the same exact integer as tile_q8_0x8 and the 512-bit tiles compute, with the same fp32
// epilogue: the same bits.
__attribute__((noinline, flatten)) void tile_q8_0x8_vnni_one_token(const MatmulArgs& a, int64_t t0, int64_t group) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  one_token_scaled_blocks<272, 128>(a, t0, group, [&](const uint8_t* values, const int8_t* x, __m256i even) {
    __m256i odd = _mm256_setzero_si256();
    static_for<4>([&](auto j) {
      const __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(values + 64 * j)), flip);
      const __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(values + 32 + 64 * j)), flip);
      even = dpbusd_broadcast_ymm(even, w0, x + 8 * j);
      odd = dpbusd_broadcast_ymm(odd, w1, x + 8 * j + 4);
    });
    return _mm256_add_epi32(even, odd);
  });
}
#endif

// Q8_0x8 for interleaved_rows: a wide family (8-token single-group tiles, 4-token pair tiles); with VNNI one
// token takes tile_q8_0x8_vnni_one_token.
template <typename Isa>
struct Q8_0x8Family {
  static constexpr bool kPairs = true;
  static constexpr bool kWide = true;
  template <int NT>
  static void tile(const MatmulArgs& a, int64_t t0, int64_t group) {
#ifdef TESSERA_YMM_VNNI
    if constexpr (NT == 1 && Isa::kVnni) {
      tile_q8_0x8_vnni_one_token(a, t0, group);
    } else
#endif
    {
      tile_q8_0x8<NT>(a, t0, group);
    }
  }
  template <int NT>
  static void pair_tile(const MatmulArgs& a, int64_t t0, int64_t group) { tile_q8_0x8<NT, 2>(a, t0, group); }
};

// Q8_0 or Q8_0x8 rows [row_begin, row_end) on 256-bit tiles.
template <typename Isa>
void q8_0_rows_ymm(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.type == KernelType::Q8_0x8) return interleaved_rows<Q8_0x8Family<Isa>>(a, row_begin, row_end);
  block32_rows<Isa, Q8_0Block>(a, row_begin, row_end);
}

}  // namespace
}  // namespace tessera::kernels
