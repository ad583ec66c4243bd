// AVX-512 activation quantization for the integer matmul kernels (matmul_acts_inl.h).
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdint>

#include "kernels/matmul_acts_inl.h"
#include "kernels/matmul_kernels.h"

namespace tessera::kernels::avx512 {

void quantize_acts(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, ActBlocks blocks, int8_t* q,
                   int8_t* q_abs, float* scale, int16_t* sum16, int16_t* sum32, int32_t* row_sum) {
  quantize_acts_impl(x, n_in, t_begin, t_end, blocks, q, q_abs, scale, sum16, sum32, row_sum);
}

}  // namespace tessera::kernels::avx512
