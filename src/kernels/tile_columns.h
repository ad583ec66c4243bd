// store_tile_columns (tile_columns_zmm_inl.h, inlined into the AVX-512 kernels) as a call, for its test: the
// kernels' tiles are at most 12 tokens wide, so no kernel test reaches the transposition's lanes 12-15. Defined in
// tile_columns_avx512.cpp, which the emulated AVX-512 test build compiles too, so machines without AVX-512 run
// the test as well.
#pragma once

#include <cstdint>

namespace tessera::kernels::avx512 {

// Tokens 0..nt-1 (nt ≤ 16), 16 words each at rows + 16·i, into n ≤ 16 runs of nt words at out (run j: word j of
// every token). Returns how many rows it read (1 + the largest token index it asked for).
int64_t store_tile_columns(int64_t nt, int64_t n, const uint32_t* rows, uint32_t* out);

}  // namespace tessera::kernels::avx512
