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

// The 2 × 2 blocked arrangement every AMX user here takes (the two kernels and the bench's peak probes): C(m, n)
// for token tile m and weight tile n in tiles 0-3, A(m) in 4-5, B(n) in 6-7. The tile intrinsics take these
// numbers as literal digits, which the loops spell out.
constexpr int c_tile(int m, int n) { return 2 * m + n; }
constexpr int a_tile(int m) { return 4 + m; }
constexpr int b_tile(int n) { return 6 + n; }

// Configures this thread's tiles in that arrangement: A and C `token_rows` rows of `a_bytes` and `c_bytes`, B 16
// rows of `b_bytes`. Whatever ran on the thread before may have configured them otherwise, so every kernel call
// loads it.
inline void configure_2x2_tiles(int token_rows, int a_bytes, int c_bytes, int b_bytes) {
  TileConfig cfg;
  for (int m = 0; m < 2; ++m) {
    cfg.rows[a_tile(m)] = static_cast<uint8_t>(token_rows);
    cfg.colsb[a_tile(m)] = static_cast<uint16_t>(a_bytes);
    for (int n = 0; n < 2; ++n) {
      cfg.rows[c_tile(m, n)] = static_cast<uint8_t>(token_rows);
      cfg.colsb[c_tile(m, n)] = static_cast<uint16_t>(c_bytes);
    }
  }
  for (int n = 0; n < 2; ++n) {
    cfg.rows[b_tile(n)] = 16;
    cfg.colsb[b_tile(n)] = static_cast<uint16_t>(b_bytes);
  }
  load_tile_config(cfg);
}

// GCC 12's tile loads and stores are volatile asm statements that name no memory operand, so the compiler may
// move ordinary loads and stores across them: between ordinary code that writes what tiles load (packed
// operands), or reads what tiles stored (sums), and those tile instructions, this makes it keep the order.
inline void tile_memory_fence() { __asm__ volatile("" : : : "memory"); }

}  // namespace tessera::kernels::amx
