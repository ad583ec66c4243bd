// tile_columns.h: the tiles' order written by tile_columns_zmm_inl.h, as a call for its test.
#include "kernels/tile_columns.h"

#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>

#include "kernels/tile_columns_zmm_inl.h"

namespace tessera::kernels::avx512 {

int64_t store_tile_columns(int64_t nt, int64_t n, const uint32_t* rows, uint32_t* out) {
  int64_t read = 0;
  kernels::store_tile_columns(
      nt, n,
      [&](int64_t i) {
        read = std::max(read, i + 1);
        return _mm512_loadu_si512(rows + 16 * i);
      },
      out);
  return read;
}

}  // namespace tessera::kernels::avx512
