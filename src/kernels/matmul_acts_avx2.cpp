// AVX2 activation quantization for the integer matmul kernels (matmul_acts_inl.h).
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_acts_inl.h"
#include "kernels/matmul_kernels.h"

namespace tessera::kernels::avx2 {

void quantize_acts(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, bool per_row, int8_t* q,
                   int8_t* q_abs, float* scale, float* block_sum, int16_t* sum16, int32_t* row_sum) {
  quantize_acts_impl(x, n_in, t_begin, t_end, per_row, q, q_abs, scale, block_sum, sum16, row_sum);
}

}  // namespace tessera::kernels::avx2
