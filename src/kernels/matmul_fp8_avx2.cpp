// AVX2 + FMA + F16C kernel for FP8 E4M3 weights: bytes widened through fp16 to fp32, then FMA with fp32
// activations (INT4 is in matmul_int4_avx2.cpp).
// Register tiles: NT tokens × NR rows with one accumulator per pair; a weight chunk is unpacked once per tile
// and reused by its NT tokens. Every output element is computed by the same instruction sequence whatever NT
// and NR are, which is what makes results batch-invariant.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/fp8_fp16_inl.h"
#include "kernels/hsum_ymm_inl.h"
#include "kernels/matmul_lowbit_kernels.h"

namespace tessera::kernels::lowbit::avx2 {
namespace {

#define UNROLL _Pragma("GCC unroll 16")

// ---- FP8 E4M3 -----------------------------------------------------------------------------------------------
// 16 weights through their fp16 bits (kernels/fp8_fp16_inl.h), which F16C widens to fp32.
inline void fp8x16_to_ps(const uint8_t* p, __m256& lo, __m256& hi) {
  const __m256i h = fp16_bits_of_fp8(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
  hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

// The same value for one byte (vector tails), through the same fp16 bits.
inline float fp8_to_scaled(uint8_t b) { return _cvtsh_ss(fp16_bits_of_fp8(b)); }

template <int NT, int NR>
void fp8_tile(const LowbitArgs& a, int64_t t0, int64_t r0) {
  const int64_t n = a.n_in, n16 = n / 16 * 16;
  __m256 acc[NT][NR];
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  const uint8_t* wr[NR];
  UNROLL
  for (int r = 0; r < NR; ++r) wr[r] = a.w + static_cast<size_t>(r0 + r) * a.row_bytes;
  const float* xt[NT];
  UNROLL
  for (int t = 0; t < NT; ++t) xt[t] = a.x + (t0 + t) * n;
  for (int64_t i = 0; i < n16; i += 16) {
    __m256 lo[NR], hi[NR];
    UNROLL
    for (int r = 0; r < NR; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(wr[r] + i + 512), _MM_HINT_T0);
      fp8x16_to_ps(wr[r] + i, lo[r], hi[r]);
    }
    UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m256 x0 = _mm256_loadu_ps(xt[t] + i), x1 = _mm256_loadu_ps(xt[t] + i + 8);
      UNROLL
      for (int r = 0; r < NR; ++r) {
        acc[t][r] = _mm256_fmadd_ps(lo[r], x0, acc[t][r]);
        acc[t][r] = _mm256_fmadd_ps(hi[r], x1, acc[t][r]);
      }
    }
  }
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) {
      float s = hsum(acc[t][r]);
      for (int64_t i = n16; i < n; ++i) s += fp8_to_scaled(wr[r][i]) * xt[t][i];
      a.y[(t0 + t) * a.n_out + r0 + r] = (a.row_scales[r0 + r] * 256.0f) * s;
    }
}

template <int NR>
void fp8_rows_nr(const LowbitArgs& a, int64_t r) {
  int64_t t = 0;
  if (a.n_tokens == 1) return fp8_tile<1, NR>(a, 0, r);
  for (; t + 4 <= a.n_tokens; t += 4) fp8_tile<4, NR>(a, t, r);
  switch (a.n_tokens - t) {
    case 3: fp8_tile<3, NR>(a, t, r); break;
    case 2: fp8_tile<2, NR>(a, t, r); break;
    case 1: fp8_tile<1, NR>(a, t, r); break;
    default: break;
  }
}

}  // namespace

// Decode (one token) streams 4 rows for independent FMA chains; batches tile 4 tokens × 2 rows (8
// accumulators + 4 widened weight vectors).
void fp8_rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  const int nr = a.n_tokens == 1 ? 4 : 2;
  int64_t r = row_begin;
  for (; r + nr <= row_end; r += nr) nr == 4 ? fp8_rows_nr<4>(a, r) : fp8_rows_nr<2>(a, r);
  for (; r < row_end; ++r) fp8_rows_nr<1>(a, r);
}

}  // namespace tessera::kernels::lowbit::avx2
