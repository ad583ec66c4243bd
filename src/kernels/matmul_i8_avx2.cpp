// AVX2 Tessera INT8 (I8) matmul kernels: I8 rows (with outliers) and I8x8 groups on the 256-bit tiles of
// matmul_i8_inl.h.
#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_i8_inl.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels::avx2 {

void matmul_i8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  i8_rows_ymm<YmmAvx2>(args, row_begin, row_end);
}

}  // namespace tessera::kernels::avx2
