// Q4_0 rows interleaved in groups of 8 (WeightLayout::Q4_0x8), the layout the Q4_0 kernels read.
//
// Row by row, a Q4_0 dot product ends each 32-value block with a horizontal problem: the block's integer sum
// sits in 8 lanes and needs its own scale conversion and multiply. With 8 rows interleaved, one register holds
// the same 4 values of 8 rows, so a broadcast of 4 activations and one vpmaddubsw serve 8 rows at once, each
// row's sum lands in its own lane, and one conversion and one FMA per block finish all 8 rows. That halves the
// instructions per weight byte (decode was compute-bound at about half the memory bandwidth).
//
// A group of 8 rows keeps its size (8 × row_bytes), block after block, 144 bytes per block:
//   bytes   0..15  the 8 rows' fp16 scales, row 0 first;
//   bytes 16..143  four 32-byte vectors P0..P3: byte 4l + i of Pj is byte 4j + i of row l's 16 nibble bytes,
//                  whose low nibble is value 4j + i and high nibble value 16 + 4j + i of the block.
// The bytes are the file's bytes, moved: repacking in place keeps the memory footprint.
#pragma once

#include <cstdint>

#include "kernels/weight_matrix.h"

namespace tessera {

constexpr int kInterleaveRows = 8;

// Whether w can take the Q4_0x8 layout: Q4_0 rows, in the Rows layout, a multiple of 8 of them.
bool can_interleave_q4_0(const WeightMatrix& w);

// Rewrites the matrix at data (n_out Q4_0 rows of n_in values, n_out a multiple of 8) into the Q4_0x8 layout.
void interleave_q4_0(uint8_t* data, int64_t n_out, int64_t n_in);

// Row r of a Q4_0x8 matrix as the file stored it (18-byte blocks): dst holds n_in / 32 * 18 bytes.
void deinterleave_q4_0_row(const WeightMatrix& w, int64_t r, uint8_t* dst);

}  // namespace tessera
