// Q4_0, Q8_0 and I8 rows interleaved in groups of 8 (WeightLayout::Interleaved8), the layout their kernels read.
//
// Row by row, a block dot product ends each 32-value block with a horizontal problem: the block's integer sum
// sits in 8 lanes and needs its own scale conversion and multiply. With 8 rows interleaved, one register holds
// the same 4 values of 8 rows, so a broadcast of 4 activations and one vpmaddubsw serve 8 rows at once, each
// row's sum lands in its own lane, and one conversion and one FMA per block finish all 8 rows. That halves the
// instructions per weight byte (Q4_0 decode was compute-bound at about half the memory bandwidth).
//
// A group of 8 rows keeps its size (8 × row_bytes), block (32 values) after block, 8 × block bytes per block:
//   bytes 0..15  Q4_0 and Q8_0: the 8 rows' fp16 scales, row 0 first (I8's per-row scales stay outside);
//   then         32-byte vectors V0, V1, ... (4 for Q4_0, 8 for Q8_0 and I8): byte 4l + i of Vj is byte 4j + i
//                of row l's block after its scale. Q8_0, I8: value 4j + i. Q4_0: the low nibble is value 4j + i
//                and the high nibble value 16 + 4j + i.
// The bytes are the file's bytes, moved: rewriting in place keeps the memory footprint.
#pragma once

#include <cstdint>

#include "kernels/weight_matrix.h"

namespace tessera {

constexpr int kInterleaveRows = 8;

// Whether w can take the Interleaved8 layout: Q4_0, Q8_0 or I8 (without LLM.int8() outliers) in the Rows layout,
// a multiple of 8 rows of a multiple of 32 values.
bool can_interleave(const WeightMatrix& w);

// Rewrites the matrix at data (n_out rows of `type`, Q4_0, Q8_0 or I8, n_out a multiple of 8) into Interleaved8.
void interleave_rows(TensorType type, uint8_t* data, int64_t n_out, int64_t n_in);

// Row r of an Interleaved8 matrix as the file stored it: dst holds w.row_bytes bytes.
void deinterleave_row(const WeightMatrix& w, int64_t r, uint8_t* dst);

}  // namespace tessera
