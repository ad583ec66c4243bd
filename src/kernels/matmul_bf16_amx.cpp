// AMX BF16 products: BF16 weights in panels of 32 rows (WeightLayout::Panel32) with bf16 products
// (WeightMatrix::bf16_products) times activations rounded to bf16, on AMX-BF16 tiles (tdpbf16ps), where the CPU
// has them (Isa::Amx). Every token count takes the tiles, one token as a tile of one row.
//
// A tile multiply takes an A tile of up to 16 tokens × 16 bf16 pairs (the activations, bf16_tile_layout.h) and a
// B tile whose row q holds, for each of 16 output rows, that row's weights at 2q and 2q + 1, and adds the 16 × 16
// dot products over the 32 values into fp32 sums (C). A panel stores each k's 32 row values side by side; the
// vpunpcklwd and vpunpckhwd of its slices 2q and 2q + 1 are row q of two B tiles, the panel's rows in the lane
// orders bf16_pair_lanes_zmm_inl.h names, which the sums keep until their epilogue puts them in row order. Each
// thread repacks a chunk of a panel's steps at a time into B tiles that stay in L1 while every token tile of the
// pass takes them.
//
// Batch invariance: a tile row's sums depend on that row's activations and the B tiles only (a token alone in a
// one-row tile and the same token among 15 others give the same bits, as the tests check), and every token's
// sums go through the same steps in the same order, from zero, whatever the batch, the thread or the chunk
// (sums kept between chunks in memory come back unchanged). How a tile adds its 32 products into a sum is the
// hardware's own (neither vdpbf16ps' order nor one fp32 rounding per product: measured here within 2e-8 of
// the exact sum relative to the products' magnitudes, against 9e-8 for vdpbf16ps' chain), so the AMX level's
// bits differ from the AVX-512 BF16 level's, and every token count at the AMX level takes the tiles.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/amx_tiles.h"
#include "kernels/bf16_pair_lanes_zmm_inl.h"
#include "kernels/bf16_tile_layout.h"
#include "kernels/matmul_kernels.h"
#include "kernels/static_for.h"

namespace tessera::kernels::amx {
namespace {

constexpr int64_t kSliceBytes = kPanelRows * 2;         // one k of a panel: 32 bf16
constexpr int64_t kTileRowBytes = 64;                   // every tile's rows: 16 pairs or 16 fp32 sums
constexpr int64_t kBTileBytes = 16 * kTileRowBytes;     // 16 pairs of 16 output rows
constexpr int64_t kStepBytes = 2 * kBTileBytes;         // a panel's step: the B tiles of both lane orders
constexpr int64_t kTileTokens = Bf16Tiles::kTileTokens;

// Steps per repacked chunk of a panel: 16 KiB of B tiles, which stay in L1 while the pass's token tiles take them.
constexpr int64_t kChunkSteps = 8;

// Activations a thread reads for one pass over its panels: they stay in the 2 MiB L2 while every chunk of every
// panel takes them, and the weights are read from memory once per pass.
constexpr int64_t kActBytesPerPass = 768 * 1024;

// This thread's tiles (amx_tiles.h's 2 × 2 arrangement, B tiles the two lane orders): A and C `rows` tokens of
// 16 pairs or 16 sums, B 16 pairs of 16 output rows; every row 64 bytes.
void configure_tiles(int rows) { configure_2x2_tiles(rows, kTileRowBytes, kTileRowBytes, kTileRowBytes); }

// Steps [s0, s1) of the panel at `panel` as B tiles: step s's lane order h at out + (s − s0) · kStepBytes + h ·
// kBTileBytes. Past an odd n_in the last k pairs with zero, and past the row every pair is zero (the activations
// there are zero too: the sums get exact zeros, as no product at all).
void pack_b_tiles(const uint8_t* panel, int64_t n_in, int64_t s0, int64_t s1, uint8_t* out) {
  const __m512i zero = _mm512_setzero_si512();
  const auto pack_pair = [&](uint8_t* step, int64_t q, __m512i a, __m512i b) TESSERA_INLINE {
    _mm512_store_si512(step + q * kTileRowBytes, _mm512_unpacklo_epi16(a, b));
    _mm512_store_si512(step + kBTileBytes + q * kTileRowBytes, _mm512_unpackhi_epi16(a, b));
  };
  constexpr int64_t kStepValues = 2 * Bf16Tiles::kStepPairs;
  for (int64_t s = s0; s < s1; ++s) {
    uint8_t* step = out + (s - s0) * kStepBytes;
    const uint8_t* slices = panel + s * kStepValues * kSliceBytes;
    if ((s + 1) * kStepValues <= n_in) {  // a whole step: its 32 slices lie end to end
      static_for<Bf16Tiles::kStepPairs>([&](auto q) TESSERA_INLINE {
        pack_pair(step, q, _mm512_loadu_si512(slices + 2 * q * kSliceBytes),
                  _mm512_loadu_si512(slices + (2 * q + 1) * kSliceBytes));
      });
      continue;
    }
    for (int64_t q = 0; q < Bf16Tiles::kStepPairs; ++q) {
      const int64_t k = s * kStepValues + 2 * q;
      pack_pair(step, q, k < n_in ? _mm512_loadu_si512(panel + k * kSliceBytes) : zero,
                k + 1 < n_in ? _mm512_loadu_si512(panel + (k + 1) * kSliceBytes) : zero);
    }
  }
}

// C tiles kept between chunks of steps: 2 token tiles × 2 lane orders.
struct alignas(64) Sums {
  float c[2][2][kTileTokens][16];
};

// Token tiles [j0, j0 + MT) times the panel of rows [r0, r0 + 32), steps [s0, s1) from the repacked `b`, the sums
// in C tiles: they start from zero where s0 is 0, else from `sums` where `reload` (several token tiles take turns
// at the tiles), else are those the last call left; at the row's end they go into y in row order, else back to
// `sums` where `reload`.
template <int MT>
void tile_steps(const MatmulArgs& a, const Bf16Tiles& tiles, int64_t j0, int64_t r0, int64_t s0, int64_t s1,
                const uint8_t* b, Sums& sums, bool reload) {
  const uint32_t* x = a.x_bf16;
  const bool last = s1 == tiles.steps;
  tile_memory_fence();  // the last epilogue's reads of `sums`, and the repacking, before these tiles
  if (s0 == 0) {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (MT == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  } else if (reload) {
    _tile_loadd(0, sums.c[0][0], kTileRowBytes);
    _tile_loadd(1, sums.c[0][1], kTileRowBytes);
    if constexpr (MT == 2) {
      _tile_loadd(2, sums.c[1][0], kTileRowBytes);
      _tile_loadd(3, sums.c[1][1], kTileRowBytes);
    }
  }
  for (int64_t s = s0; s < s1; ++s) {
    const uint8_t* step = b + (s - s0) * kStepBytes;
    _tile_loadd(6, step, kTileRowBytes);
    _tile_loadd(7, step + kBTileBytes, kTileRowBytes);
    _tile_loadd(4, x + tiles.tile_at(j0, s), kTileRowBytes);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (MT == 2) {
      _tile_loadd(5, x + tiles.tile_at(j0 + 1, s), kTileRowBytes);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  if (!last && !reload) return;
  _tile_stored(0, sums.c[0][0], kTileRowBytes);
  _tile_stored(1, sums.c[0][1], kTileRowBytes);
  if constexpr (MT == 2) {
    _tile_stored(2, sums.c[1][0], kTileRowBytes);
    _tile_stored(3, sums.c[1][1], kTileRowBytes);
  }
  if (!last) return;
  tile_memory_fence();
  for (int m = 0; m < MT; ++m) {
    const int64_t t0 = (j0 + m) * kTileTokens;
    const int64_t n = std::min<int64_t>(tiles.rows, a.n_tokens - t0);
    for (int64_t r = 0; r < n; ++r) {
      __m512 rows0, rows1;
      to_rows(_mm512_load_ps(sums.c[m][0][r]), _mm512_load_ps(sums.c[m][1][r]), rows0, rows1);
      float* y = a.y + (t0 + r) * a.n_out + r0;
      _mm512_storeu_ps(y, rows0);
      _mm512_storeu_ps(y + 16, rows1);
    }
  }
}

}  // namespace

void matmul_bf16_products_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  const Bf16Tiles tiles(a.n_in, a.n_tokens);
  const int64_t token_tiles = tiles.token_tiles();
  const int64_t tile_bytes = tiles.steps * tiles.rows * kTileRowBytes;  // one token tile's whole row
  const int64_t pass_tiles = std::max<int64_t>(2, kActBytesPerPass / tile_bytes / 2 * 2);
  // Sums wait in memory between chunks only where a pass has more than 2 token tiles (`reload` below).
  thread_local std::vector<Sums> waiting;
  Sums own;
  const int64_t pairs_a_pass = (std::min(pass_tiles, token_tiles) + 1) / 2;
  if (pairs_a_pass > 1 && waiting.size() < size_t(pairs_a_pass)) waiting.resize(size_t(pairs_a_pass));
  Sums* sums = pairs_a_pass > 1 ? waiting.data() : &own;
  alignas(64) uint8_t b[kChunkSteps * kStepBytes];
  configure_tiles(static_cast<int>(tiles.rows));
  for (int64_t jp = 0; jp < token_tiles; jp += pass_tiles) {
    const int64_t jp_end = std::min(token_tiles, jp + pass_tiles);
    // A pass of one or two token tiles (up to 32 tokens) keeps its sums in the C tiles for the whole row.
    const bool reload = jp_end - jp > 2;
    for (int64_t r = row_begin; r < row_end; r += kPanelRows) {
      const uint8_t* panel = a.w + size_t(r / kPanelRows) * kPanelRows * a.row_bytes;
      for (int64_t s0 = 0; s0 < tiles.steps; s0 += kChunkSteps) {
        const int64_t s1 = std::min(tiles.steps, s0 + kChunkSteps);
        tile_memory_fence();  // the last chunk's tile loads of b before it is overwritten
        pack_b_tiles(panel, a.n_in, s0, s1, b);
        for (int64_t j = jp; j < jp_end; j += 2) {
          Sums& s = sums[(j - jp) / 2];
          j + 2 <= jp_end ? tile_steps<2>(a, tiles, j, r, s0, s1, b, s, reload)
                          : tile_steps<1>(a, tiles, j, r, s0, s1, b, s, reload);
        }
      }
    }
  }
  // Unused tile state is not saved on context switches (8 KiB a thread).
  _tile_release();
}

}  // namespace tessera::kernels::amx
