// How the later token tiles of a tile column share out the next column's weights, each requesting its share into
// L2 while it computes (matmul_zmm_inl.h's weight stream). Integer arithmetic only, so that a test on any machine
// checks that every block of the next column is requested.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tessera::kernels {

// Tile `tile` (1 .. n_tiles - 1; the first tile streams its own column) requests blocks [begin, end) of each of
// the next column's group streams, one at each of its own blocks b with b % 2^shift == 0: block begin + b >> shift.
// The requests fall in the first (end - begin) · 2^shift of the tile's blocks, at least half of them.
struct ColumnShare {
  int64_t begin = 0, end = 0;
  int shift = 0;
};

// The next column's block that the tile requests at its own block b, or -1 for none.
inline int64_t share_block(const ColumnShare& share, int64_t b) {
  const int64_t p = share.begin + (b >> share.shift);
  return p < share.end && (b & ((int64_t(1) << share.shift) - 1)) == 0 ? p : -1;
}

inline ColumnShare column_share(int64_t blocks, int64_t tile, int64_t n_tiles) {
  ColumnShare share;
  if (tile <= 0 || tile >= n_tiles || blocks <= 0) return share;
  const int64_t shares = n_tiles - 1, per_share = (blocks + shares - 1) / shares;
  share.begin = std::min(blocks, (tile - 1) * per_share);
  share.end = std::min(blocks, tile * per_share);
  // The widest power-of-two spacing whose requests over the tile's `blocks` blocks still cover the share.
  while ((blocks >> (share.shift + 1)) >= per_share) ++share.shift;
  return share;
}

}  // namespace tessera::kernels
