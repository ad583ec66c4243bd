// AMX BF16 products: BF16 weights in panels of 32 rows (WeightLayout::Panel32) with bf16 products
// (WeightMatrix::bf16_products) times activations rounded to bf16, on AMX-BF16 tiles (tdpbf16ps), where the CPU
// has them (Isa::Amx). Every token count takes the tiles, one token as a tile of one row.
//
// A tile multiply takes an A tile of up to 16 tokens × 16 bf16 pairs (the activations, bf16_tile_layout.h) and a
// B tile whose row q holds, for each of 16 output rows, that row's weights at 2q and 2q + 1, and adds the 16 × 16
// dot products over the 32 values into fp32 sums (C). A BF16 panel stores exactly such rows (interleave.h: pair
// q's 128 bytes are the 32 rows' pair words), so a step's two B tiles, rows 0-15 and 16-31 of the panel, load
// from the weights as they lie (at +0 and +64, each tile row 128 bytes apart), and the sums come in row order.
// Only the row's last step, where n_in is not a multiple of 32, is copied out with zero pairs past the row.
// (Panels of one k's 32 rows side by side took a repacking of every step into B tiles: one-token products of
// 65536 × 2048 from memory, 2 threads, read 22.3-22.8 GB/s that way against 25.6-26.3 with the weights loaded as
// they lie, before the requests below.)
//
// Batch invariance: a tile row's sums depend on that row's activations and the B tiles only (a token alone in a
// one-row tile and the same token among 15 others give the same bits, as the tests check), and every token's
// sums go through the same steps in the same order, from zero, whatever the batch, the thread or the chunk
// (sums kept between chunks in memory come back unchanged). How a tile adds its 32 products into a sum is the
// hardware's own (neither vdpbf16ps' order nor one fp32 rounding per product: measured here within 2e-8 of
// the exact sum relative to the products' magnitudes, against 9e-8 for vdpbf16ps' chain), so the AMX level's
// bits differ from the AVX-512 BF16 level's, and every token count at the AMX level takes the tiles.
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/amx_tiles.h"
#include "kernels/bf16_tile_layout.h"
#include "kernels/matmul_kernels.h"

namespace tessera::kernels::amx {
namespace {

constexpr int64_t kPairBytes = kPanelRows * 4;          // a pair of k of a panel: 32 pair words
constexpr int64_t kTileRowBytes = 64;                   // every tile's rows: 16 pairs or 16 fp32 sums
constexpr int64_t kStepBytes = Bf16Tiles::kStepPairs * kPairBytes;  // a step of a panel: its 2 B tiles
constexpr int64_t kTileTokens = Bf16Tiles::kTileTokens;

// Steps per chunk of a panel: 16 KiB of weights, which stay in L1 while the pass's token tiles take them.
constexpr int64_t kChunkSteps = 8;

// The first token tiles of a pass request the weights this far ahead into L1, 32 lines a step: a one-token
// product of 65536 × 2048 from memory (2 threads, Intel Xeon) read 25.2-26.4 GB/s without requests, 27.3-29.5
// with them 2-6 KiB ahead, 23.4 at 32 KiB.
constexpr int64_t kRequestAhead = 4096;

// Activations a thread reads for one pass over its panels: they stay in the 2 MiB L2 while every chunk of every
// panel takes them, and the weights are read from memory once per pass.
constexpr int64_t kActBytesPerPass = 768 * 1024;

// This thread's tiles (amx_tiles.h's 2 × 2 arrangement, B tiles rows 0-15 and 16-31 of a panel): A and C `rows`
// tokens of 16 pairs or 16 sums, B 16 pairs of 16 output rows; every row 64 bytes.
void configure_tiles(int rows) { configure_2x2_tiles(rows, kTileRowBytes, kTileRowBytes, kTileRowBytes); }

// The panel's last step s where n_in is not a multiple of 32: its pairs in the panel's order, an odd n_in's last
// k (a slice of its own) paired with zero, and zero pairs past the row (the activations there are zero too: the
// sums get exact zeros, as no product at all).
void copy_last_step(const uint8_t* panel, int64_t n_in, int64_t s, uint8_t* out) {
  for (int64_t q = 0; q < Bf16Tiles::kStepPairs; ++q) {
    const int64_t k = 2 * (s * Bf16Tiles::kStepPairs + q);
    const uint8_t* pair = panel + (k / 2) * kPairBytes;
    for (int half = 0; half < 2; ++half) {
      __m512i words = _mm512_setzero_si512();
      if (k + 1 < n_in) {
        words = _mm512_loadu_si512(pair + 64 * half);
      } else if (k < n_in) {  // the slice's rows 16·half.. as words with a zero high half
        words = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 32 * half)));
      }
      _mm512_store_si512(out + q * kPairBytes + 64 * half, words);
    }
  }
}

// C tiles kept between chunks of steps: 2 token tiles × rows 0-15 and 16-31 of the panel.
struct alignas(64) Sums {
  float c[2][2][kTileTokens][16];
};

// Token tiles [j0, j0 + MT) times the panel of rows [r0, r0 + 32), steps [s0, s1), the weights at `panel` or,
// for the last step where `last_step` is not null, there; the sums in C tiles: they start from zero where s0 is
// 0, else from `sums` where `reload` (several token tiles take turns at the tiles), else are those the last call
// left; at the row's end they go into y, else back to `sums` where `reload`. `request`: the weights
// kRequestAhead bytes past each step's are requested (past the panel: the next one, or past the thread's rows
// another thread's, which is harmless; a request past the matrix does not fault).
template <int MT>
void tile_steps(const MatmulArgs& a, const Bf16Tiles& tiles, int64_t j0, int64_t r0, int64_t s0, int64_t s1,
                const uint8_t* panel, const uint8_t* last_step, Sums& sums, bool reload, bool request) {
  const uint32_t* x = a.x_bf16;
  const bool last = s1 == tiles.steps;
  tile_memory_fence();  // the last epilogue's reads of `sums`, and the last step's copy, before these tiles
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
    const uint8_t* step = last_step != nullptr && s + 1 == tiles.steps ? last_step : panel + s * kStepBytes;
    if (request) {
      const char* ahead = reinterpret_cast<const char*>(panel + s * kStepBytes + kRequestAhead);
      for (int64_t line = 0; line < kStepBytes; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
    }
    _tile_loadd(6, step, kPairBytes);
    _tile_loadd(7, step + 64, kPairBytes);
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
      float* y = a.y + (t0 + r) * a.n_out + r0;
      _mm512_storeu_ps(y, _mm512_load_ps(sums.c[m][0][r]));
      _mm512_storeu_ps(y + 16, _mm512_load_ps(sums.c[m][1][r]));
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
  alignas(64) uint8_t last_step[kStepBytes];
  const bool copies_last_step = a.n_in % (2 * Bf16Tiles::kStepPairs) != 0;
  configure_tiles(static_cast<int>(tiles.rows));
  for (int64_t jp = 0; jp < token_tiles; jp += pass_tiles) {
    const int64_t jp_end = std::min(token_tiles, jp + pass_tiles);
    // A pass of one or two token tiles (up to 32 tokens) keeps its sums in the C tiles for the whole row.
    const bool reload = jp_end - jp > 2;
    for (int64_t r = row_begin; r < row_end; r += kPanelRows) {
      const uint8_t* panel = a.w + size_t(r / kPanelRows) * kPanelRows * a.row_bytes;
      for (int64_t s0 = 0; s0 < tiles.steps; s0 += kChunkSteps) {
        const int64_t s1 = std::min(tiles.steps, s0 + kChunkSteps);
        const bool copied = copies_last_step && s1 == tiles.steps;
        if (copied) {
          tile_memory_fence();  // the last panel's tile loads of last_step before it is overwritten
          copy_last_step(panel, a.n_in, s1 - 1, last_step);
        }
        const uint8_t* last = copied ? last_step : nullptr;
        for (int64_t j = jp; j < jp_end; j += 2) {
          Sums& s = sums[(j - jp) / 2];
          j + 2 <= jp_end ? tile_steps<2>(a, tiles, j, r, s0, s1, panel, last, s, reload, j == jp)
                          : tile_steps<1>(a, tiles, j, r, s0, s1, panel, last, s, reload, j == jp);
        }
      }
    }
  }
  // Unused tile state is not saved on context switches (8 KiB a thread).
  _tile_release();
}

}  // namespace tessera::kernels::amx
