// AVX-512 VNNI Tessera INT8 (I8) matmul kernels: the 256-bit tiles of matmul_i8_inl.h with dpbusd as the byte
// dot product, and 512-bit batch tiles for I8x8 (matmul_zmm_inl.h).
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdint>

#include "core/cpu_features.h"
#include "kernels/matmul_i8_inl.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_ymm_inl.h"
#include "kernels/matmul_zmm_inl.h"

namespace tessera::kernels::avx512 {

void matmul_i8_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  // Every batch, decode included, takes the 512-bit tiles (matmul_zmm_inl.h; why and the figures:
  // matmul_q8_0_avx512.cpp); the 256-bit tiles take a thread's odd last group of 8 rows, with the same bits.
  // Where 512-bit instructions run on 256-bit units (Zen 4), one-token products take the 256-bit tiles, one group
  // a time, as Q8_0 does (why: matmul_q8_0_avx512.cpp). I8 decode steps after 32 positions, alternated in one
  // process: 0.798 [0.794, 0.803] of the time in the host's faster minutes, 0.900 [0.883, 0.918] in its slower ones.
  if (args.n_tokens == 1 && decode_tiles_ymm()) return i8_rows_ymm<YmmVnni>(args, row_begin, row_end);
  if (args.type == KernelType::I8x8) {
    return zmm_interleaved_rows<ZmmBlockFamily<ZmmKind::I8, I8x8Family<YmmVnni>>>(args, row_begin, row_end);
  }
  i8_rows_ymm<YmmVnni>(args, row_begin, row_end);
}

}  // namespace tessera::kernels::avx512
