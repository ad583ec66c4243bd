// AVX-512 (F/BW/VL/DQ + VNNI) matmul kernels: the shared 256-bit kernels with VNNI's dpbusd as the byte dot
// product (one instruction instead of maddubs + madd) and bigger register tiles from the 32 vector registers,
// and 512-bit batch tiles for the interleaved integer types (matmul_zmm_inl.h).
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/matmul_kernels.h"
#include "kernels/static_for.h"

namespace tessera::kernels::avx512 {
namespace {

// Lane j = Σ u[4j+i]·s[4j+i] in exact int32, like the AVX2 maddubs + madd pair (which never saturates for
// our operands), so both ISA levels give the same integer sums.
inline __m256i dot_u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }

constexpr int kTileTokens = 4;
constexpr int rows_per_tile(int) { return 4; }

#include "kernels/matmul_x86_inl.h"
#include "kernels/matmul_zmm_inl.h"

// The float panel tiles on zmm (matmul_panel_inl.h). 32 registers: a prompt tile of 2 vectors (one panel) × 12
// tokens keeps 24 accumulators, 2 weight vectors and a broadcast; one token streams 8 vectors (128 rows).
struct PanelVec {
  using V = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kPackedVectors = 2, kPackedTokens = 12;
  static constexpr int direct_vectors(int n_tokens) { return n_tokens <= 2 ? 8 : n_tokens == 3 ? 6 : 4; }
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float f) { return _mm512_set1_ps(f); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V load_f32(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static V load_f16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static V load_bf16(const uint8_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  // 16 FP8 E4M3 bytes as their values · 2^-8: the 7 magnitude bits moved into an fp16's exponent and mantissa.
  static V load_fp8_scaled(const uint8_t* p) {
    const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i h =
        _mm256_and_si256(_mm256_srai_epi16(_mm256_slli_epi16(v, 8), 1), _mm256_set1_epi16(static_cast<int16_t>(0xBF80)));
    return _mm512_cvtph_ps(h);
  }
  static void pin(V& v) { keep_in_zmm(v); }
};

#include "kernels/matmul_panel_inl.h"

}  // namespace

void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  if (is_panel_type(args.type)) return panel_matmul_rows(args, row_begin, row_end);
  if (takes_zmm_tiles(args)) return zmm_matmul_rows(args, row_begin, row_end);
  matmul_rows_impl(args, row_begin, row_end);
}

void quantize_acts(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, bool per_row, int8_t* q,
                   int8_t* q_abs, float* scale, float* block_sum, int16_t* sum16, int32_t* row_sum) {
  quantize_acts_impl(x, n_in, t_begin, t_end, per_row, q, q_abs, scale, block_sum, sum16, row_sum);
}

}  // namespace tessera::kernels::avx512
