// Where the activations of BF16 products wait for the AMX-BF16 tiles (matmul_bf16_amx.cpp): MatmulArgs::x_bf16's
// layout at Isa::Amx, written by avx512::round_to_bf16_tiles, sized by matmul.cpp.
//
// A tile multiply (tdpbf16ps) takes 16 pairs (32 values) of each of up to 16 tokens: one step. Token tile j
// (tokens 16j..16j + 15) at step s is `rows` rows of 16 words, each word a pair of bf16 (x[2p] low, x[2p + 1]
// high), consecutive: 1 KiB for a whole tile, where a tile loaded from the tokens' rows would have its rows fall
// into few L1 sets. `rows` is 16, or the token count of a smaller batch (whose tiles are that many rows). Pairs
// past the row's end, and in a larger batch the last tile's rows past its last token, are zero.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::kernels {
// An anonymous namespace, as the kernels' other shared headers: each file compiles its own copy.
namespace {

struct Bf16Tiles {
  static constexpr int64_t kStepPairs = 16;  // words of a tile row
  static constexpr int64_t kTileTokens = 16;

  int64_t n_tokens = 0;
  int64_t steps = 0;  // per token row: ceil(n_in / 32)
  int64_t rows = 0;   // of every token tile

  Bf16Tiles(int64_t n_in, int64_t n_tokens_)
      : n_tokens(n_tokens_),
        steps((n_in + 2 * kStepPairs - 1) / (2 * kStepPairs)),
        rows(n_tokens_ < kTileTokens ? n_tokens_ : kTileTokens) {}

  int64_t token_tiles() const { return (n_tokens + kTileTokens - 1) / kTileTokens; }
  // Tokens with a row in the tiles: the batch and the last tile's zero rows.
  int64_t padded_tokens() const { return token_tiles() * rows; }
  size_t words() const { return static_cast<size_t>(padded_tokens() * steps * kStepPairs); }
  // The word where token tile j's step s begins.
  size_t tile_at(int64_t j, int64_t s) const { return static_cast<size_t>((j * steps + s) * rows * kStepPairs); }
  // The word where token t's pairs of step s begin.
  size_t row_at(int64_t t, int64_t s) const {
    return tile_at(t / kTileTokens, s) + static_cast<size_t>(t % kTileTokens * kStepPairs);
  }
};

}  // namespace
}  // namespace tessera::kernels
