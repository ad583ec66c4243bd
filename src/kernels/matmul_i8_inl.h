// Tessera INT8 (I8) tiles on 256-bit registers, for both x86 levels (matmul_i8_avx2.cpp, matmul_i8_avx512.cpp):
// rows with their LLM.int8() outlier columns, and I8x8 (interleaved groups of 8 rows) one group or two at a time.
// Anonymous namespace and an explicit YmmIsa parameter, as matmul_ymm_inl.h explains.
#pragma once

#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels {
namespace {

// Tessera INT8: int8 rows with one fp32 scale per row; activations carry one scale per token, so the whole
// row reduces in exact int32 arithmetic and is scaled once.
template <typename Isa, int NT, int NR>
__attribute__((noinline, flatten)) void tile_i8(const TileCtx& c) {
  const int64_t n = c.a.n_in, nc = n / 32;
  __m256i acc[NT][NR];
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_si256();
  const int8_t* xq[NT];
  UNROLL
  for (int t = 0; t < NT; ++t) xq[t] = c.a.xq.q + (c.t0 + t) * n;
  const int8_t* wr[NR];
  UNROLL
  for (int r = 0; r < NR; ++r) wr[r] = reinterpret_cast<const int8_t*>(c.wrow(r));
  for (int64_t i = 0; i < nc; ++i) {
    __m256i ws[NR], wa[NR];
    UNROLL
    for (int r = 0; r < NR; ++r) {
      prefetch(reinterpret_cast<const uint8_t*>(wr[r] + i * 32) + kPrefetchBytes);
      ws[r] = _mm256_loadu_si256((const __m256i*)(wr[r] + i * 32));
      wa[r] = _mm256_abs_epi8(ws[r]);
    }
    UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m256i xv = _mm256_loadu_si256((const __m256i*)(xq[t] + i * 32));
      UNROLL
      for (int r = 0; r < NR; ++r)
        acc[t][r] = _mm256_add_epi32(acc[t][r], Isa::dot_u8s8(wa[r], _mm256_sign_epi8(xv, ws[r])));
    }
  }
  UNROLL
  for (int t = 0; t < NT; ++t) {
    UNROLL
    for (int r = 0; r < NR; ++r) {
      int64_t sum = hsum_epi32(acc[t][r]);
      for (int64_t i = nc * 32; i < n; ++i) sum += static_cast<int32_t>(wr[r][i]) * xq[t][i];
      const float rs = c.a.row_scales[c.r0 + r];
      float y = static_cast<float>(sum) * (rs * c.a.xq.scale[c.t0 + t]);
      // Outlier columns (int8_outliers.h): fp32 products with the weight row, which is still in L1.
      if (c.a.xq.outlier_count != nullptr && c.a.xq.outlier_count[c.t0 + t] > 0) {
        const int64_t base = (c.t0 + t) * n;
        float f = 0.0f;
        for (int32_t k = 0; k < c.a.xq.outlier_count[c.t0 + t]; ++k)
          f += c.a.xq.outlier_val[base + k] * static_cast<float>(wr[r][c.a.xq.outlier_col[base + k]]);
        y += rs * f;
      }
      c.out(t, r) = y;
    }
  }
}

// I8x8 (kernels/interleave.h), NG groups of 8 rows (1, or 2 from `group`) for NT tokens: Q8_0x8's products
// without block scales. The whole row reduces in exact int32 lanes (one per row) and is scaled once by the 8
// rows' scales times the token's, the same integers and the same final multiply as the row kernel (tile_i8).
template <int NT, int NG = 1>
__attribute__((noinline, flatten)) void tile_i8x8(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 256;  // 8 rows × 32 values
  const int64_t nb = a.n_in / 32;
  const TileActs<NT> x(a, t0);
  __m256i s32[NG][NT];
  static_for<NG>([&](auto g) { static_for<NT>([&](auto t) { s32[g][t] = _mm256_setzero_si256(); }); });
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk[NG];
    static_for<NG>([&](auto g) { blk[g] = group_block(a, group + g, b, kBlockBytes); });
    block_products<NT, NG>(blk, 0, x, b, s32);
  }
  static_for<NG>([&](auto g) {
    const __m256 row_scales = _mm256_loadu_ps(a.row_scales + (group + g) * 8);
    static_for<NT>([&](auto t) {
      const __m256 scale = _mm256_mul_ps(row_scales, _mm256_set1_ps(a.xq.scale[t0 + t]));
      _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + (group + g) * 8, _mm256_mul_ps(_mm256_cvtepi32_ps(s32[g][t]), scale));
    });
  });
}

#ifdef TESSERA_YMM_VNNI
// I8x8's one-token tile with VNNI: one group of 8 rows, so a thread's groups are read as one stream. The row's
// sum is Σ (w + 128)·x − 128·Σx in wrapping int32 (w ^ 0x80 as vpdpbusd's unsigned operand, the first chain
// starting at −128·Σx), the same exact integer as tile_i8x8 and the 512-bit tiles compute, scaled by the same multiplies:
// the same bits.
__attribute__((noinline, flatten)) void tile_i8x8_vnni_one_token(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 256;  // 8 rows × 32 values
  const int64_t nb = a.n_in / 32;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const int8_t* xq = a.xq.q + t0 * a.n_in;
  const uint8_t* blk = group_block_unrequested(a, group, 0, kBlockBytes);
  // In wrapping arithmetic: the lanes' true sums fit int32, the offset alone need not (NaN inputs).
  // Four chains (vector j of a block into chain j): the row's sum is one reduction, not one per block.
  __m256i s[4] = {_mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(a.xq.row_sum[t0]) * 0xffffff80u)),
                  _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int64_t b = 0; b < nb; ++b, blk += kBlockBytes, xq += 32) {
    static_for<8>([&](auto j) {
      const __m256i w = _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(blk + 32 * j)), flip);
      s[j % 4] = dpbusd_broadcast_ymm(s[j % 4], w, xq + 4 * j);
    });
  }
  const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(s[0], s[1]), _mm256_add_epi32(s[2], s[3]));
  const __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(a.row_scales + group * 8), _mm256_set1_ps(a.xq.scale[t0]));
  _mm256_storeu_ps(a.y + t0 * a.n_out + group * 8, _mm256_mul_ps(_mm256_cvtepi32_ps(sum), scale));
}
#endif

template <typename Isa>
struct I8Tile {
  template <int NT, int NR>
  static void run(const TileCtx& c) { tile_i8<Isa, NT, NR>(c); }
};

// I8x8 for interleaved_rows: a wide family (8-token single-group tiles, 4-token pair tiles); with VNNI one token
// takes tile_i8x8_vnni_one_token.
template <typename Isa>
struct I8x8Family {
  static constexpr bool kPairs = true;
  static constexpr bool kWide = true;
  template <int NT>
  static void tile(const MatmulArgs& a, int64_t t0, int64_t group) {
#ifdef TESSERA_YMM_VNNI
    if constexpr (NT == 1 && Isa::kVnni) {
      tile_i8x8_vnni_one_token(a, t0, group);
    } else
#endif
    {
      tile_i8x8<NT>(a, t0, group);
    }
  }
  template <int NT>
  static void pair_tile(const MatmulArgs& a, int64_t t0, int64_t group) { tile_i8x8<NT, 2>(a, t0, group); }
};

// I8 or I8x8 rows [row_begin, row_end) on 256-bit tiles.
template <typename Isa>
void i8_rows_ymm(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.type == KernelType::I8x8) return interleaved_rows<I8x8Family<Isa>>(a, row_begin, row_end);
  row_tiles<Isa, I8Tile<Isa>>(a, row_begin, row_end, 0);
}

}  // namespace
}  // namespace tessera::kernels
