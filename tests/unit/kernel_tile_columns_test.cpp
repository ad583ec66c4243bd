// store_tile_columns (kernels/tile_columns_zmm_inl.h) at every tile width from 1 to 16 tokens and every run
// count, against the plain definition of the tiles' order. The kernels call it with tiles of at most 12 tokens,
// so their tests never reach the transposition's lanes 12-15. Runs where the CPU has the AVX-512 kernels' level,
// and in the emulated AVX-512 binary on every machine with AVX2.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/tile_columns.h"
#include "kernel_test_util.h"

namespace {

TEST(TileColumns, EveryTileWidthAndRunCountWritesExactlyTheTilesOrder) {
  // The level the *_avx512.cpp objects are compiled for and dispatched at.
  TESSERA_SKIP_IF_UNSUPPORTED(tessera::Isa::Avx512Vnni);
  constexpr uint32_t kUntouched = 0xdeadbeef;
  for (int64_t nt = 1; nt <= 16; ++nt) {
    std::vector<uint32_t> rows(size_t(16 * nt));  // exactly the tile's tokens: a read past them is a sanitizer error
    for (int64_t i = 0; i < nt; ++i)
      for (int64_t j = 0; j < 16; ++j) rows[size_t(16 * i + j)] = uint32_t(0x1000 * (i + 1) + j);  // token i, word j
    for (int64_t n = 1; n <= 16; ++n) {
      std::vector<uint32_t> out(16 * 16 + 16, kUntouched);
      ASSERT_EQ(tessera::kernels::avx512::store_tile_columns(nt, n, rows.data(), out.data()), nt)
          << "nt " << nt << " n " << n << ": rows read";
      for (int64_t j = 0; j < n; ++j)
        for (int64_t t = 0; t < nt; ++t)
          ASSERT_EQ(out[size_t(j * nt + t)], rows[size_t(16 * t + j)])
              << "nt " << nt << " n " << n << " run " << j << " token " << t;
      for (size_t k = size_t(n * nt); k < out.size(); ++k)
        ASSERT_EQ(out[k], kUntouched) << "nt " << nt << " n " << n << ": word " << k << " past the runs";
    }
  }
}

}  // namespace
