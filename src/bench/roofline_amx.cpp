// The AMX roofline probe (Isa::Amx): tdpbssd on full tiles, the int8 products AMX-INT8 runs at its own rate.
#include <immintrin.h>

#include <cstdint>

#include "bench/roofline_kernels.h"
#include "kernels/amx_tiles.h"

namespace tessera::roofline::amx {

int32_t int8_tiles(int64_t iters) {
  // Four independent accumulators (C: tiles 0-3, 16 rows of 16 int32), each taking one of two A tiles (4, 5) times
  // one of two B tiles (6, 7), all 16 rows of 64 bytes: 16 × 16 × 64 products per tdpbssd, as a 2 × 2 blocked
  // matrix product issues them.
  kernels::amx::TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  kernels::amx::load_tile_config(cfg);
  alignas(64) int8_t ones[16 * 64];
  for (int8_t& b : ones) b = 1;
  kernels::amx::tile_memory_fence();
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  alignas(64) int32_t sums[4][16 * 16];
  _tile_stored(0, sums[0], 64);
  _tile_stored(1, sums[1], 64);
  _tile_stored(2, sums[2], 64);
  _tile_stored(3, sums[3], 64);
  _tile_release();
  kernels::amx::tile_memory_fence();
  int32_t t = 0;
  for (const auto& tile : sums) t += tile[0] + tile[255];
  return t;
}

}  // namespace tessera::roofline::amx
