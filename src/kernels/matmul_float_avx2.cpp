// AVX2 + FMA + F16C float matmul kernels: F32, F16 and BF16 rows (matmul_float_inl.h), and F32, F16, BF16 and
// FP8 panels (matmul_panel_inl.h) on ymm.
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_float_inl.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_panel_inl.h"
#include "kernels/matmul_ymm_inl.h"
#include "kernels/static_for.h"

namespace tessera::kernels::avx2 {
namespace {

// The float panel tiles on ymm (matmul_panel_inl.h: PV). 16 registers: a prompt tile of 2 vectors (16 rows) × 6
// tokens keeps 12 accumulators, 2 weight vectors and a broadcast; one token streams 8 vectors (64 rows) for 8
// independent FMA chains.
struct PanelYmm {
  using V = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kPackedRows = 16, kPackedTokens = 6, kMaxAccumulators = 12;
  static constexpr int packed_vectors(int) { return 2; }
  // k per chunk and tokens per block of a prompt (matmul_panel_inl.h): a block's chunk of activations (120 ×
  // 512 floats, 240 KiB) stays in a Zen 3 core's 512 KiB L2 while the tiles of rows pass over it, and a tile's
  // chunk of weights (16 rows × 512 values, 16 KiB of F16) in L1 while the block's token tiles pass.
  static constexpr int64_t kChunk = 512, kBlockTokens = 120;
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
  // The even k's weights (low halves) or the odd k's (high halves) of BF16's pair words (interleave.h), loaded
  // as floats.
  static V bf16_low(V pairs) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(pairs), 16)); }
  static V bf16_high(V pairs) {
    return _mm256_and_ps(pairs, _mm256_castsi256_ps(_mm256_set1_epi32(int32_t(0xffff0000u))));
  }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  // 16 FP8 E4M3 bytes (two vectors' rows) as their values · 2^-8, fp16_bits_of_fp8 on a whole ymm of words.
  static void load_fp8_scaled_pair(const uint8_t* p, V& lo, V& hi) {
    const __m256i h = fp16_bits_of_fp8(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  }
  static void pin(V& v) { keep_in_register(v); }
};

}  // namespace

void pack_panel_acts(const float* x, int64_t n_in, int64_t n_tokens, int64_t t_begin, int64_t t_end, float* out) {
  pack_panel_tokens<PanelYmm>(x, n_in, n_tokens, t_begin, t_end, out);
}

void matmul_float_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  switch (args.type) {
    case KernelType::F32: return row_tiles<YmmAvx2, FloatTile<F32Load>>(args, row_begin, row_end, 0);
    case KernelType::F16: return row_tiles<YmmAvx2, FloatTile<F16Load>>(args, row_begin, row_end, 0);
    case KernelType::BF16: return row_tiles<YmmAvx2, FloatTile<BF16Load>>(args, row_begin, row_end, 0);
    default: return panel_matmul_rows<PanelYmm>(args, row_begin, row_end);
  }
}

}  // namespace tessera::kernels::avx2
