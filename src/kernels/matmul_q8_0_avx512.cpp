// AVX-512 VNNI Q8_0 matmul kernels: the 256-bit tiles of matmul_q8_0_inl.h with dpbusd as the byte dot
// product, and 512-bit batch tiles for Q8_0x8 (matmul_zmm_inl.h).
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdint>

#include "core/cpu_features.h"
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
  // Where 512-bit instructions run as two 256-bit halves (Zen 4: decode_tiles_ymm()), one-token products take the
  // 256-bit tiles after all, one group of 8 rows at a time (tile_q8_0x8_vnni_one_token; Q4_0 and I8 alike): a
  // thread then reads its rows as one stream, where the 512-bit tile's column of 4 groups reads 4 streams 17 KiB
  // apart, 272 bytes of each in turn. Zen 4, a step's weights read in that order with no arithmetic took 1.40x
  // the time of one sequential stream in the host's faster minutes (1.08x in its slower ones; docs/performance.md,
  // sixteenth Zen 4 session). Q8_0 decode steps after 32 positions, alternated in one process: 0.815 [0.811,
  // 0.819] of the time in the faster minutes, 0.944 [0.926, 0.963] in the slower ones. (The 256-bit one-token tile
  // had been measured level before, when it still summed the AVX2 way, with the sign trick and int16 pairs.)
  if (args.n_tokens == 1 && decode_tiles_ymm()) return q8_0_rows_ymm<YmmVnni>(args, row_begin, row_end);
  if (args.type == KernelType::Q8_0x8) {
    return zmm_interleaved_rows<ZmmBlockFamily<ZmmKind::Q8_0, Q8_0x8Family<YmmVnni>>>(args, row_begin, row_end);
  }
  q8_0_rows_ymm<YmmVnni>(args, row_begin, row_end);
}

}  // namespace tessera::kernels::avx512
