// AVX-512 VNNI Q8_0 matmul kernels: the 256-bit tiles of matmul_q8_0_inl.h with dpbusd as the byte dot
// product, and 512-bit batch tiles for Q8_0x8 (matmul_zmm_inl.h).
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdint>

#include "kernels/matmul_kernels.h"
#include "kernels/matmul_q8_0_inl.h"
#include "kernels/matmul_ymm_inl.h"
#include "kernels/matmul_zmm_inl.h"

namespace tessera::kernels::avx512 {

void matmul_q8_0_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  // Every batch, decode included, takes the 512-bit tiles (matmul_zmm_inl.h); the 256-bit tiles take a thread's
  // odd last group of 8 rows, with the same bits. Decode had taken the 256-bit tiles, whose group_block requests a
  // block's lines in one burst; the 512-bit tiles' weight stream (Ahead) requests them spread and a column ahead.
  // `tessera bench` batch 1, alternating (Zen 5, 2 threads, TinyLlama shape): Q8_0 37-42 tok/s against 29-34, I8
  // 37-42 against 30-37, Q4_0 58-81 against 49-52 (5632x2048 from memory, µs: Q4_0x8 110-124 against 118-172,
  // Q8_0x8 and I8x8 both ways). On Zen 4, Q8_0x8's and I8x8's decode tiles since leave the stream to the hardware
  // prefetchers (matmul_zmm_inl.h's lone_tile_streams).
  // Where 512-bit instructions run as two 256-bit halves (Zen 4: decode_tiles_ymm()), Q4_0x8's one-token products
  // take the 256-bit tiles after all (matmul_q4_0_avx512.cpp); Q8_0x8's and I8x8's measured level there and stay.
  // 5632x2048 from memory, 2 threads, Zen 4, µs, 256-bit against 512-bit tiles, alternating: Q8_0x8 260-262
  // against 259-281 in the host's faster minutes, 341 against 348 in a slower one; I8x8 231-234 against 242-254
  // and 319 against 326; `tessera bench --quick` Q8_0 batch 1 26.0-41.0 tok/s against 25.4-38.2 in five pairs.
  if (args.type == KernelType::Q8_0x8) {
    return zmm_interleaved_rows<ZmmBlockFamily<ZmmKind::Q8_0, Q8_0x8Family>>(args, row_begin, row_end);
  }
  q8_0_rows_ymm<YmmVnni>(args, row_begin, row_end);
}

}  // namespace tessera::kernels::avx512
