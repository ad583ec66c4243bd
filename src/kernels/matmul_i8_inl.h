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

template <typename Isa>
struct I8Tile {
  template <int NT, int NR>
  static void run(const TileCtx& c) { tile_i8<Isa, NT, NR>(c); }
};

// I8x8 for interleaved_rows: a wide family (8-token single-group tiles, 4-token pair tiles).
struct I8x8Family {
  static constexpr bool kPairs = true;
  static constexpr bool kWide = true;
  template <int NT>
  static void tile(const MatmulArgs& a, int64_t t0, int64_t group) { tile_i8x8<NT>(a, t0, group); }
  template <int NT>
  static void pair_tile(const MatmulArgs& a, int64_t t0, int64_t group) { tile_i8x8<NT, 2>(a, t0, group); }
};

// I8 or I8x8 rows [row_begin, row_end) on 256-bit tiles.
template <typename Isa>
void i8_rows_ymm(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.type == KernelType::I8x8) return interleaved_rows<I8x8Family>(a, row_begin, row_end);
  row_tiles<Isa, I8Tile<Isa>>(a, row_begin, row_end, 0);
}

}  // namespace
}  // namespace tessera::kernels
