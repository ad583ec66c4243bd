// The AMX roofline probes (Isa::Amx): tdpbssd and tdpbf16ps on full tiles, the int8 and bf16 products AMX runs at
// its own rates.
#include <immintrin.h>

#include <cstdint>

#include "bench/roofline_kernels.h"
#include "kernels/amx_tiles.h"

namespace tessera::roofline::amx {
namespace {

// Four independent accumulators (C: tiles 0-3, 16 rows of 64 bytes), each taking one of two A tiles (4, 5) times
// one of two B tiles (6, 7), all 16 rows of 64 bytes, as a 2 × 2 blocked matrix product issues them: `multiply`
// runs the four tile multiplies once. The operands are 16-bit `operand` patterns (int8 1s, or a bf16 value);
// returns the sum of two elements of each accumulator (int32 or float sums, added as Total).
template <typename Sum, typename Total, typename Multiply>
Total four_tile_chains(int64_t iters, uint16_t operand, Multiply multiply) {
  kernels::amx::configure_2x2_tiles(16, 64, 64, 64);
  alignas(64) uint16_t operands[16 * 32];
  for (uint16_t& v : operands) v = operand;
  kernels::amx::tile_memory_fence();
  _tile_loadd(4, operands, 64);
  _tile_loadd(5, operands, 64);
  _tile_loadd(6, operands, 64);
  _tile_loadd(7, operands, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t i = 0; i < iters; ++i) multiply();
  alignas(64) Sum sums[4][16 * 16];
  _tile_stored(0, sums[0], 64);
  _tile_stored(1, sums[1], 64);
  _tile_stored(2, sums[2], 64);
  _tile_stored(3, sums[3], 64);
  _tile_release();
  kernels::amx::tile_memory_fence();
  Total t = 0;
  for (const auto& tile : sums) t += Total(tile[0]) + Total(tile[255]);
  return t;
}

}  // namespace

int32_t int8_tiles(int64_t iters) {
  // The int32 sums wrap in the tiles after 2^25 iterations; the total of eight of them is an int64.
  return static_cast<int32_t>(four_tile_chains<int32_t, int64_t>(iters, 0x0101, [] {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }));
}

float bf16_tiles(int64_t iters) {
  // bf16 2^-8: the sums grow by 2^-11 a multiply, far from overflow at any probe length.
  return four_tile_chains<float, float>(iters, 0x3b80, [] {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  });
}

}  // namespace tessera::roofline::amx
