// AVX2 K-quant matmul kernels: Q4_K and Q6_K rows, Q4_Kx8 and Q6_Kx8 groups, on the 256-bit tiles of
// matmul_kquant_inl.h.
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_kernels.h"
#include "kernels/matmul_kquant_inl.h"
#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels::avx2 {

void matmul_kquant_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  kquant_rows_ymm<YmmAvx2>(args, row_begin, row_end);
}

}  // namespace tessera::kernels::avx2
