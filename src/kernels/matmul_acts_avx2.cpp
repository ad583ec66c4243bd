// AVX2 activation quantization for the integer matmul kernels (matmul_acts_inl.h).
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_acts_inl.h"
#include "kernels/matmul_kernels.h"

namespace tessera::kernels::avx2 {

void quantize_acts(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, ActBlocks blocks, int8_t* q,
                   int8_t* q_abs, float* scale, int16_t* sum16, int16_t* sum32, int32_t* row_sum) {
  quantize_acts_impl(x, n_in, t_begin, t_end, blocks, q, q_abs, scale, sum16, sum32, row_sum);
}

}  // namespace tessera::kernels::avx2
