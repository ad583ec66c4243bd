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

}  // namespace

void matmul_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  if (takes_zmm_tiles(args)) return zmm_matmul_rows(args, row_begin, row_end);
  matmul_rows_impl(args, row_begin, row_end);
}

void quantize_acts(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, bool per_row, int8_t* q,
                   int8_t* q_abs, float* scale, float* block_sum, int16_t* sum16, int32_t* row_sum) {
  quantize_acts_impl(x, n_in, t_begin, t_end, per_row, q, q_abs, scale, block_sum, sum16, row_sum);
}

}  // namespace tessera::kernels::avx512
