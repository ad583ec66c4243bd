// AVX2 + FMA + F16C kernels for FP8 E4M3 (bytes widened through fp16 to fp32, then FMA) and INT4 group-wise
// (nibbles unpacked to bytes, int8 dot products with per-token activations, fp32 per-group scaling).
// Register tiles: NT tokens × NR rows with one accumulator per pair; a weight chunk is unpacked once per tile
// and reused by its NT tokens. Every output element is computed by the same instruction sequence whatever NT
// and NR are, which is what makes results batch-invariant.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/matmul_lowbit_kernels.h"

namespace tessera::kernels::lowbit::avx2 {
namespace {

#define UNROLL _Pragma("GCC unroll 16")

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Fixed-order dot product of two fp32 vectors (8 lanes, then the tail in order).
inline float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float s = hsum(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// ---- FP8 E4M3 -----------------------------------------------------------------------------------------------
// E4M3 → fp16 is a shift: sign stays on top, the 7 magnitude bits move right by one into the fp16 exponent
// and mantissa (bias 7 vs 15, so the fp16 value is the E4M3 value · 2^-8, subnormals included, exactly); the
// 2^8 goes into the row scale. F16C then widens to fp32.
inline void fp8x16_to_ps(const uint8_t* p, __m256& lo, __m256& hi) {
  const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i h = _mm256_and_si256(_mm256_srai_epi16(_mm256_slli_epi16(v, 8), 1),
                                     _mm256_set1_epi16(static_cast<int16_t>(0xBF80)));
  lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
  hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

// The same value for one byte (vector tails), through the same fp16 bits.
inline float fp8_to_scaled(uint8_t b) {
  const uint16_t h = static_cast<uint16_t>(((static_cast<int16_t>(b << 8) >> 1)) & 0xBF80);
  return _cvtsh_ss(h);
}

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

// ---- INT4 ---------------------------------------------------------------------------------------------------
// 16 packed bytes → 32 values in [0, 15] in order: the low 128-bit lane keeps the low nibbles (values 0-15),
// the high lane shifts right by 4 (values 16-31).
inline __m256i unpack_int4(const uint8_t* p) {
  const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_and_si256(_mm256_srlv_epi32(raw, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                          _mm256_set1_epi8(0x0F));
}

// Per-row parameters widened to fp32 once per row tile: scale[g] and scale[g]·zero[g].
struct RowParams {
  std::vector<float> scale, scaled_zero;  // [NR][n_groups]
};

// y = x_scale · Σ_g s_g · (Σ q·xq − zero_g · Σ xq): unsigned nibbles × signed activations (maddubs: at most
// 2·15·127 per int16 lane, no saturation), int32 within a group, fp32 across groups; the zero-point part is
// one dot product of s·zero with the token's group sums.
template <int NT, int NR>
void int4_tile(const LowbitArgs& a, int64_t t0, int64_t r0, const float* scale, const float* scaled_zero) {
  const int64_t n_chunks = (a.n_in + 31) / 32, chunks_per_group = a.group_size / 32, ng = a.n_groups;
  const int64_t padded = n_chunks * 32;
  __m256 acc[NT][NR];
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  const uint8_t* wr[NR];
  UNROLL
  for (int r = 0; r < NR; ++r) wr[r] = a.w + static_cast<size_t>(r0 + r) * a.row_bytes;
  const int8_t* xq[NT];
  UNROLL
  for (int t = 0; t < NT; ++t) xq[t] = a.xq + (t0 + t) * padded;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t g = 0; g < ng; ++g) {
    const int64_t c_begin = g * chunks_per_group;
    const int64_t c_end = c_begin + chunks_per_group < n_chunks ? c_begin + chunks_per_group : n_chunks;
    __m256i idot[NT][NR];
    UNROLL
    for (int t = 0; t < NT; ++t)
      UNROLL
      for (int r = 0; r < NR; ++r) idot[t][r] = _mm256_setzero_si256();
    for (int64_t c = c_begin; c < c_end; ++c) {
      __m256i w[NR];
      UNROLL
      for (int r = 0; r < NR; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(wr[r] + c * 16 + 512), _MM_HINT_T0);
        w[r] = unpack_int4(wr[r] + c * 16);
      }
      UNROLL
      for (int t = 0; t < NT; ++t) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[t] + c * 32));
        UNROLL
        for (int r = 0; r < NR; ++r)
          idot[t][r] = _mm256_add_epi32(idot[t][r], _mm256_madd_epi16(_mm256_maddubs_epi16(w[r], xv), ones));
      }
    }
    UNROLL
    for (int r = 0; r < NR; ++r) {
      const __m256 s = _mm256_set1_ps(scale[r * ng + g]);
      UNROLL
      for (int t = 0; t < NT; ++t) acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(idot[t][r]), s, acc[t][r]);
    }
  }
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) {
      const float zero_part = dot_f32(scaled_zero + r * ng, a.group_sums + (t0 + t) * ng, ng);
      a.y[(t0 + t) * a.n_out + r0 + r] = a.x_scale[t0 + t] * (hsum(acc[t][r]) - zero_part);
    }
}

template <int NR>
void int4_rows_nr(const LowbitArgs& a, int64_t r0, std::vector<float>& params) {
  const int64_t ng = a.n_groups;
  float* scale = params.data();
  float* scaled_zero = params.data() + NR * ng;
  for (int r = 0; r < NR; ++r) {
    const uint16_t* s = a.group_scales + (r0 + r) * ng;
    const uint16_t* z = a.group_zeros + (r0 + r) * ng;
    for (int64_t g = 0; g < ng; ++g) {
      scale[r * ng + g] = _cvtsh_ss(s[g]);
      scaled_zero[r * ng + g] = scale[r * ng + g] * _cvtsh_ss(z[g]);
    }
  }
  if (a.n_tokens == 1) return int4_tile<1, NR>(a, 0, r0, scale, scaled_zero);
  int64_t t = 0;
  for (; t + 4 <= a.n_tokens; t += 4) int4_tile<4, NR>(a, t, r0, scale, scaled_zero);
  switch (a.n_tokens - t) {
    case 3: int4_tile<3, NR>(a, t, r0, scale, scaled_zero); break;
    case 2: int4_tile<2, NR>(a, t, r0, scale, scaled_zero); break;
    case 1: int4_tile<1, NR>(a, t, r0, scale, scaled_zero); break;
    default: break;
  }
}

}  // namespace

// Decode (one token) streams 4 rows for independent FMA chains; batches tile 4 tokens × 2 rows (FP8: 8
// accumulators + 4 widened weight vectors) or 4 tokens × 1 row (INT4: 4 int32 + 4 fp32 accumulators).
void fp8_rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  const int nr = a.n_tokens == 1 ? 4 : 2;
  int64_t r = row_begin;
  for (; r + nr <= row_end; r += nr) nr == 4 ? fp8_rows_nr<4>(a, r) : fp8_rows_nr<2>(a, r);
  for (; r < row_end; ++r) fp8_rows_nr<1>(a, r);
}

void int4_rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  thread_local std::vector<float> params;
  if (params.size() < size_t(8 * a.n_groups)) params.resize(size_t(8 * a.n_groups));
  int64_t r = row_begin;
  if (a.n_tokens == 1) {
    for (; r + 4 <= row_end; r += 4) int4_rows_nr<4>(a, r, params);
  }
  for (; r < row_end; ++r) int4_rows_nr<1>(a, r, params);
}

}  // namespace tessera::kernels::lowbit::avx2
