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

}  // namespace

void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  matmul_rows_impl(args, row_begin, row_end);
}

void quantize_acts(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, bool per_row, int8_t* q,
                   int8_t* q_abs, float* scale, float* block_sum, int16_t* sum16, int32_t* row_sum) {
  quantize_acts_impl(x, n_in, t_begin, t_end, per_row, q, q_abs, scale, block_sum, sum16, row_sum);
}

}  // namespace tessera::kernels::avx2
