// AMX Tessera INT8 (I8) products: I8x8 matrices times batches of tokens on AMX-INT8 tiles (tdpbssd), where the
// CPU has them (Isa::Amx: Intel Sapphire Rapids and later). Everything else goes to the AVX-512 kernels.
//
// A tile multiply (tdpbssd) takes up to 16 rows of 64 int8 values from one tile (A) and a tile (B) whose row q
// holds values 4q..4q+3 of each output column, and adds their int32 dot products into a third (C). I8x8's layout
// (kernels/interleave.h) is already B's: byte 4l + i of a group's 32-byte vector q is row l's value 4q + i, so
// one k-range of 64 values of a group of 8 rows is 512 consecutive bytes, a B tile of 16 rows × 32 bytes (8
// output rows). The tokens' int8 activations are packed once into A tiles (16 tokens × 64 values, packed_acts).
// Signed × signed (tdpbssd): neither the sign trick nor the −128·Σx offset of vpdpbusd. The int32 sums are the
// exact integers the VNNI tiles compute, and the epilogue is theirs (the sum converted, times the row's scale
// times the token's), so a token's outputs have the same bits alone (one token takes the VNNI tile) or in any
// batch.
//
// Eight tiles: C for 2 × 16 tokens × 2 groups (4), A for the two token tiles (2), B for the two groups (2).
// Each 64-value step loads 3 KiB into tiles for 4 multiplies of 16 × 8 × 64. A batch's last token tile is
// padded with zero rows, whose outputs are not stored.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/amx_tiles.h"
#include "kernels/matmul_kernels.h"

namespace tessera::kernels::amx {
namespace {

constexpr int kTileTokens = 16;   // rows of an A tile: tokens
constexpr int kStepValues = amx::kStepValues;  // bytes of an A row: activations per multiply
constexpr int kGroupRows = 8;     // I8x8's group: the columns of a B tile
constexpr int kGroupStepBytes = kStepValues * kGroupRows;  // a group's 64 values of 8 rows: one B tile

// From this many tokens a batch takes the tiles; fewer take the VNNI tiles (decode, small batches), which read the
// weights as fast with less work (5632x2048, 2 threads, two runs: up to 8 tokens the VNNI tiles as fast or
// faster, from 12 the tiles ahead).
constexpr int64_t kMinTokens = 12;

// This thread's tiles (amx_tiles.h's 2 × 2 arrangement, B tiles the two groups): A 16 tokens × 64 values, B 16
// rows of 32 bytes (values 4q..4q + 3 of 8 rows), C 16 tokens × 8 int32.
void configure_tiles() {
  static_assert(kStepValues / 4 == 16);
  configure_2x2_tiles(kTileTokens, kStepValues, kGroupRows * sizeof(int32_t), kGroupRows * 4);
}

// The activations as A tiles: token tile j's step s (64 values of 16 tokens, 1 KiB, rows past the batch zero) at
// (j · steps + s) · 1 KiB. Loaded as they lie (rows n_in apart), a tile's 16 rows fall into few L1 sets (2 for
// n_in = 2048) and evict each other; packed, a tile is 16 consecutive lines. Each thread packs the batch once per
// quantization (QuantizedActs::id) and keeps it for every matrix and row chunk that shares the input.
struct PackedActs {
  std::vector<int8_t> tiles;
  uint64_t id = 0;
};

const int8_t* packed_acts(const MatmulArgs& a) {
  thread_local PackedActs packed;
  const int64_t n = a.n_in, steps = n / kStepValues;
  const int64_t token_tiles = (a.n_tokens + kTileTokens - 1) / kTileTokens;
  const size_t bytes = static_cast<size_t>(token_tiles * kTileTokens * n);
  if (packed.tiles.size() < bytes) packed.tiles.resize(bytes);
  if (still_packed_for(packed.id, a.xq.id)) return packed.tiles.data();
  for (int64_t j = 0; j < token_tiles; ++j) {
    for (int r = 0; r < kTileTokens; ++r) {
      const int64_t t = j * kTileTokens + r;
      int8_t* out = packed.tiles.data() + (j * steps * kTileTokens + r) * kStepValues;
      if (t >= a.n_tokens) {
        for (int64_t s = 0; s < steps; ++s) std::memset(out + s * kTileTokens * kStepValues, 0, kStepValues);
        continue;
      }
      const int8_t* in = a.xq.q + t * n;
      for (int64_t s = 0; s < steps; ++s) {
        _mm512_storeu_si512(out + s * kTileTokens * kStepValues, _mm512_loadu_si512(in + s * kStepValues));
      }
    }
  }
  return packed.tiles.data();
}

// C tiles kept between chunks of steps (tile_range): 2 token tiles × 2 groups.
struct alignas(64) Sums {
  int32_t c[2][2][kTileTokens][kGroupRows];
};

// Token tiles [j0, j0 + MT) (MT = 2: 32 tokens) times NG groups from `group`, steps [s0, s1) of the row: the
// int32 sums start from `sums` (or zero where s0 is 0), and go back to it, or, at the row's end, are scaled
// into y (each output of the batch's tokens once).
template <int MT, int NG>
void tile_steps(const MatmulArgs& a, const int8_t* acts, int64_t j0, int64_t group, int64_t s0, int64_t s1,
                Sums& sums) {
  const int64_t steps = a.n_in / kStepValues;
  constexpr int64_t kTileBytes = kTileTokens * kStepValues;
  constexpr size_t kSumStride = kGroupRows * sizeof(int32_t);
  const int8_t* x = acts + j0 * steps * kTileBytes;
  const uint8_t* w[NG];
  for (int g = 0; g < NG; ++g) w[g] = a.w + (group + g) * kGroupRows * a.row_bytes;
  tile_memory_fence();  // the last epilogue's reads of `sums` before these tiles store to it again
  if (s0 == 0) {
    _tile_zero(0);
    if constexpr (NG == 2) _tile_zero(1);
    if constexpr (MT == 2) _tile_zero(2);
    if constexpr (MT == 2 && NG == 2) _tile_zero(3);
  } else {
    _tile_loadd(0, sums.c[0][0], kSumStride);
    if constexpr (NG == 2) _tile_loadd(1, sums.c[0][1], kSumStride);
    if constexpr (MT == 2) _tile_loadd(2, sums.c[1][0], kSumStride);
    if constexpr (MT == 2 && NG == 2) _tile_loadd(3, sums.c[1][1], kSumStride);
  }
  for (int64_t s = s0; s < s1; ++s) {
    const size_t wk = static_cast<size_t>(s) * kGroupStepBytes;
    _tile_loadd(6, w[0] + wk, kGroupRows * 4);
    if constexpr (NG == 2) _tile_loadd(7, w[1] + wk, kGroupRows * 4);
    _tile_loadd(4, x + s * kTileBytes, kStepValues);
    _tile_dpbssd(0, 4, 6);
    if constexpr (NG == 2) _tile_dpbssd(1, 4, 7);
    if constexpr (MT == 2) {
      _tile_loadd(5, x + (steps + s) * kTileBytes, kStepValues);
      _tile_dpbssd(2, 5, 6);
      if constexpr (NG == 2) _tile_dpbssd(3, 5, 7);
    }
  }
  _tile_stored(0, sums.c[0][0], kSumStride);
  if constexpr (NG == 2) _tile_stored(1, sums.c[0][1], kSumStride);
  if constexpr (MT == 2) _tile_stored(2, sums.c[1][0], kSumStride);
  if constexpr (MT == 2 && NG == 2) _tile_stored(3, sums.c[1][1], kSumStride);
  if (s1 < steps) return;
  tile_memory_fence();
  // The VNNI tiles' epilogue (matmul_i8_inl.h): float(sum) × (row scale × token scale).
  for (int g = 0; g < NG; ++g) {
    const __m256 row_scales = _mm256_loadu_ps(a.row_scales + (group + g) * kGroupRows);
    for (int m = 0; m < MT; ++m) {
      const int64_t t0 = (j0 + m) * kTileTokens;
      const int rows = static_cast<int>(std::min<int64_t>(kTileTokens, a.n_tokens - t0));
      for (int r = 0; r < rows; ++r) {
        const int64_t t = t0 + r;
        const __m256 scale = _mm256_mul_ps(row_scales, _mm256_set1_ps(a.xq.scale[t]));
        const __m256 sum = _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sums.c[m][g][r])));
        _mm256_storeu_ps(a.y + t * a.n_out + (group + g) * kGroupRows, _mm256_mul_ps(sum, scale));
      }
    }
  }
}

// Steps of the row per chunk: 2 token tiles' activations for them (16 KiB) stay in L1 while the chunk's groups
// take them, so each step streams only the weights from L2 (1 KiB), not the weights and activations (3 KiB). A
// loop of these tile instructions ran 2.7 TOP/s on one core with its operands in L1, 1.2-1.4 with both from L2;
// 5632x2048 at 512 tokens, 2 threads: 2142 GOP/s with the chunks, 1966-2056 without.
constexpr int64_t kChunkSteps = 8;
// Group pairs that share a chunk's activations (their sums wait in an 8 KiB buffer between chunks).
constexpr int64_t kChunkPairs = 4;

// Token tiles [j0, j1) times groups [g_begin, g_end): 2 tiles (32 tokens) by 2 groups, then what is left; for
// each 2 tiles, the row in chunks of steps, each chunk over up to kChunkPairs group pairs.
void tile_range(const MatmulArgs& a, const int8_t* acts, int64_t j0, int64_t j1, int64_t g_begin, int64_t g_end) {
  const int64_t steps = a.n_in / kStepValues;
  Sums sums[kChunkPairs];
  for (int64_t gb = g_begin; gb < g_end; gb += 2 * kChunkPairs) {
    const int64_t gb_end = std::min(g_end, gb + 2 * kChunkPairs);
    for (int64_t j = j0; j < j1; j += 2) {
      const bool two = j + 2 <= j1;
      for (int64_t s = 0; s < steps; s += kChunkSteps) {
        const int64_t s1 = std::min(steps, s + kChunkSteps);
        for (int64_t g = gb; g < gb_end; g += 2) {
          Sums& sum = sums[(g - gb) / 2];
          if (g + 1 < gb_end) {
            two ? tile_steps<2, 2>(a, acts, j, g, s, s1, sum) : tile_steps<1, 2>(a, acts, j, g, s, s1, sum);
          } else {
            two ? tile_steps<2, 1>(a, acts, j, g, s, s1, sum) : tile_steps<1, 1>(a, acts, j, g, s, s1, sum);
          }
        }
      }
    }
  }
}

// Activations a thread reads for one pass over its groups: with its groups' weights (a chunk of rows, at most a
// few hundred KiB) they stay in the 2 MiB L2 while every group of the chunk takes them.
constexpr int64_t kActBytesPerPass = 768 * 1024;

// matmul.cpp sends here only the matrices takes_amx_int8_tiles accepts (I8x8 in whole steps, no outliers).
bool takes_i8_tiles(const MatmulArgs& a) { return a.n_tokens >= kMinTokens; }

}  // namespace

void matmul_i8_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (!takes_i8_tiles(a)) return avx512::matmul_i8_rows(a, row_begin, row_end);
  const int8_t* acts = packed_acts(a);
  tile_memory_fence();
  const int64_t token_tiles = (a.n_tokens + kTileTokens - 1) / kTileTokens;
  const int64_t pass_tiles = std::max<int64_t>(2, kActBytesPerPass / (a.n_in * kTileTokens) / 2 * 2);
  configure_tiles();
  for (int64_t j = 0; j < token_tiles; j += pass_tiles) {
    tile_range(a, acts, j, std::min(token_tiles, j + pass_tiles), row_begin / kGroupRows, row_end / kGroupRows);
  }
  // Unused tile state is not saved on context switches (8 KiB a thread).
  _tile_release();
}

}  // namespace tessera::kernels::amx
