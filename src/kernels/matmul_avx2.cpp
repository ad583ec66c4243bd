// AVX2 + FMA + F16C matmul kernels: maddubs/madd integer dot products, 4 tokens × 2 rows register tiles.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/matmul_kernels.h"
#include "kernels/static_for.h"

namespace tessera::kernels::avx2 {
namespace {

// maddubs adds adjacent byte products into int16 (no saturation: |u| ≤ 128, |s| ≤ 127 gives at most 32512),
// madd by one adds adjacent pairs into int32: lane j sums bytes 4j..4j+3, the same grouping as VNNI's dpbusd.
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// 16 ymm registers: 4 tokens × 2 rows = 8 accumulators leaves room for the row blocks, their absolute values,
// and one activation block; one token streams 4 rows for more independent FMA chains at decode.
constexpr int kTileTokens = 4;
constexpr int rows_per_tile(int n_tokens) { return n_tokens >= 3 ? 2 : 4; }

#include "kernels/matmul_x86_inl.h"

// The float panel tiles on ymm (matmul_panel_inl.h). 16 registers: a prompt tile of 2 vectors (16 rows) × 6
// tokens keeps 12 accumulators, 2 weight vectors and a broadcast; one token streams 8 vectors (64 rows) for 8
// independent FMA chains.
struct PanelVec {
  using V = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kPackedVectors = 2, kPackedTokens = 6;
  static constexpr int direct_vectors(int n_tokens) { return n_tokens == 1 ? 8 : n_tokens == 2 ? 4 : 2; }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float f) { return _mm256_set1_ps(f); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V load_f32(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static V load_f16(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static V load_bf16(const uint8_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  // 8 FP8 E4M3 bytes as their values · 2^-8: the 7 magnitude bits moved into an fp16's exponent and mantissa.
  static V load_fp8_scaled(const uint8_t* p) {
    const __m128i v = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m128i h = _mm_and_si128(_mm_srai_epi16(_mm_slli_epi16(v, 8), 1), _mm_set1_epi16(static_cast<int16_t>(0xBF80)));
    return _mm256_cvtph_ps(h);
  }
  static void pin(V& v) { keep_in_register(v); }
};

#include "kernels/matmul_panel_inl.h"

}  // namespace

void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  if (is_panel_type(args.type)) return panel_matmul_rows(args, row_begin, row_end);
  matmul_rows_impl(args, row_begin, row_end);
}

void quantize_acts(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, bool per_row, int8_t* q,
                   int8_t* q_abs, float* scale, float* block_sum, int16_t* sum16, int32_t* row_sum) {
  quantize_acts_impl(x, n_in, t_begin, t_end, per_row, q, q_abs, scale, block_sum, sum16, row_sum);
}

}  // namespace tessera::kernels::avx2
