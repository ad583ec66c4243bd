// AVX-512 VNNI Q4_0 matmul kernels: the 256-bit tiles of matmul_q4_0_inl.h with dpbusd as the byte dot
// product, and 512-bit batch tiles for Q4_0x8 (matmul_zmm_inl.h).
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdint>

#include "core/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_q4_0_inl.h"
#include "kernels/matmul_ymm_inl.h"
#include "kernels/matmul_zmm_inl.h"

namespace tessera::kernels::avx512 {

void matmul_q4_0_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  // Every batch, decode included, takes the 512-bit tiles (matmul_zmm_inl.h; why and the figures:
  // matmul_q8_0_avx512.cpp); the 256-bit tiles take a thread's odd last group of 8 rows, with the same bits, and
  // decode where 512-bit instructions run on 256-bit units (decode_tiles_ymm(): Zen 4). There, 5632x2048 from
  // memory, 2 threads, µs, 256-bit against 512-bit tiles, alternating: 140-141 against 193-208 in the host's faster
  // minutes, 177 against 215 in a slower one; `tessera bench --quick` Q4_0 batch 1 60.8-75.9 tok/s against
  // 42.8-50.8 in three pairs. On Zen 5 the 512-bit tiles won (matmul_q8_0_avx512.cpp).
  if (args.n_tokens == 1 && decode_tiles_ymm()) return q4_0_rows_ymm<YmmVnni>(args, row_begin, row_end);
  if (args.type == KernelType::Q4_0x8) {
    return zmm_interleaved_rows<ZmmBlockFamily<ZmmKind::Q4_0, Q4_0x8Family<YmmVnni>>>(args, row_begin, row_end);
  }
  q4_0_rows_ymm<YmmVnni>(args, row_begin, row_end);
}

}  // namespace tessera::kernels::avx512
