// AVX2 Q4_0 matmul kernels: Q4_0 rows and Q4_0x8 groups on the 256-bit tiles of matmul_q4_0_inl.h.
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_kernels.h"
#include "kernels/matmul_q4_0_inl.h"
#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels::avx2 {

void matmul_q4_0_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  q4_0_rows_ymm<YmmAvx2>(args, row_begin, row_end);
}

}  // namespace tessera::kernels::avx2
