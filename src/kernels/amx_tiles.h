// AMX tile configuration, for *_amx.cpp files only (compiled with -mamx-tile): ldtilecfg's operand and its load.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tessera::kernels::amx {

// ldtilecfg's 64-byte operand, palette 1: tile t has rows[t] rows of colsb[t] bytes (0: unused).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Configures this thread's tiles (clearing them all).
inline void load_tile_config(const TileConfig& cfg) {
  // GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes of cfg, so stores to the rest could be dropped
  // as dead (SIGILL at the first tile load): this empty statement reads all 64.
  __asm__ volatile("" : : "m"(cfg));
  _tile_loadconfig(&cfg);
}

// GCC 12's tile loads and stores are volatile asm statements that name no memory operand, so the compiler may
// move ordinary loads and stores across them: between ordinary code that writes what tiles load (packed
// operands), or reads what tiles stored (sums), and those tile instructions, this makes it keep the order.
inline void tile_memory_fence() { __asm__ volatile("" : : : "memory"); }

}  // namespace tessera::kernels::amx
