// F32, F16 and BF16 rows (WeightLayout::Rows) on 256-bit registers: the AVX2 level's float tiles
// (matmul_float_avx2.cpp), and the one-value loads the 512-bit tiles finish a row's tail with
// (matmul_float_avx512.cpp). Anonymous namespace and an explicit YmmIsa parameter, as matmul_ymm_inl.h explains.
#pragma once

#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels {
namespace {

// Float weights: 8 values converted to fp32 per step, FMA with fp32 activations.
struct F32Load {
  static __m256 load(const uint8_t* row, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i); }
  static float one(const uint8_t* row, int64_t i) { return reinterpret_cast<const float*>(row)[i]; }
};
struct F16Load {
  static __m256 load(const uint8_t* row, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(row + 2 * i)));
  }
  static float one(const uint8_t* row, int64_t i) { return half_to_float(row + 2 * i); }
};
struct BF16Load {
  static __m256 load(const uint8_t* row, int64_t i) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
  static float one(const uint8_t* row, int64_t i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

template <typename Load, int NT, int NR>
__attribute__((noinline, flatten)) void tile_float(const TileCtx& c) {
  const int64_t n = c.a.n_in, nv = n / 8;
  __m256 acc[NT][NR];
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  const float* x[NT];
  UNROLL
  for (int t = 0; t < NT; ++t) x[t] = c.a.x + (c.t0 + t) * n;
  const uint8_t* wr[NR];
  UNROLL
  for (int r = 0; r < NR; ++r) wr[r] = c.wrow(r);
  for (int64_t i = 0; i < nv * 8; i += 8) {
    __m256 wv[NR];
    UNROLL
    for (int r = 0; r < NR; ++r) {
      if (i % 16 == 0) prefetch(wr[r] + sizeof(float) * i + kPrefetchBytes);
      wv[r] = Load::load(wr[r], i);
    }
    UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m256 xv = _mm256_loadu_ps(x[t] + i);
      UNROLL
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_fmadd_ps(wv[r], xv, acc[t][r]);
    }
  }
  UNROLL
  for (int t = 0; t < NT; ++t) {
    UNROLL
    for (int r = 0; r < NR; ++r) {
      float sum = hsum(acc[t][r]);
      for (int64_t i = nv * 8; i < n; ++i) sum += Load::one(wr[r], i) * x[t][i];
      c.out(t, r) = sum;
    }
  }
}

template <typename Load>
struct FloatTile {
  template <int NT, int NR>
  static void run(const TileCtx& c) { tile_float<Load, NT, NR>(c); }
};

}  // namespace
}  // namespace tessera::kernels
