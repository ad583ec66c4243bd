// store_tile_columns (kernels/tile_columns_zmm_inl.h) at every tile width from 1 to 16 tokens and every run
// count. The kernels call it with tiles of at most 12 tokens, so their tests never see the transposition's lanes
// 12-15; this test does, against the plain definition of the tiles' order. AVX-512 only (skipped elsewhere): the
// helper is compiled for it here by a target pragma around the header, which defines only internal functions.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "core/cpu_features.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
// As in the *_avx512.cpp kernel files: GCC 12's unmasked 512-bit intrinsics pass a self-initialized variable as
// their merge source, which -W(maybe-)uninitialized reports at every use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/tile_columns_zmm_inl.h"

namespace {

// rows: 16 rows of 16 words (row i: token i's values); out: n runs of nt words.
void store_columns(int64_t nt, int64_t n, const uint32_t* rows, uint32_t* out) {
  tessera::kernels::store_tile_columns(
      nt, n, [&](int64_t i) TESSERA_INLINE { return _mm512_loadu_si512(rows + 16 * i); }, out);
}

}  // namespace
#pragma GCC diagnostic pop
#pragma GCC pop_options

namespace {

bool has_avx512() {
  const tessera::CpuFeatures& f = tessera::cpu_features();
  return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.os_saves_zmm;
}

TEST(TileColumns, EveryTileWidthAndRunCountWritesExactlyTheTilesOrder) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<uint32_t> rows(16 * 16);
  for (uint32_t i = 0; i < 16; ++i)
    for (uint32_t j = 0; j < 16; ++j) rows[16 * i + j] = 0x1000u * (i + 1) + j;  // token i, value j
  constexpr uint32_t kUntouched = 0xdeadbeef;
  for (int64_t nt = 1; nt <= 16; ++nt) {
    for (int64_t n = 1; n <= 16; ++n) {
      std::vector<uint32_t> out(16 * 16 + 16, kUntouched);
      store_columns(nt, n, rows.data(), out.data());
      for (int64_t j = 0; j < n; ++j)
        for (int64_t t = 0; t < nt; ++t)
          ASSERT_EQ(out[size_t(j * nt + t)], rows[size_t(16 * t + j)]) << "nt " << nt << " n " << n << " run " << j
                                                                         << " token " << t;
      for (size_t k = size_t(n * nt); k < out.size(); ++k)
        ASSERT_EQ(out[k], kUntouched) << "nt " << nt << " n " << n << ": word " << k << " past the runs";
    }
  }
}

}  // namespace
