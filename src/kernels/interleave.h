// Q4_0, Q8_0, I8, Q4_K and Q6_K rows interleaved in groups of 8 (WeightLayout::Interleaved8), the layout their
// kernels read.
//
// Row by row, a block dot product ends each 32-value block with a horizontal problem: the block's integer sum
// sits in 8 lanes and needs its own scale conversion and multiply. With 8 rows interleaved, one register holds
// the same 4 values of 8 rows, so a broadcast of 4 activations and one vpmaddubsw serve 8 rows at once, each
// row's sum lands in its own lane, and one conversion and one FMA per block finish all 8 rows. That halves the
// instructions per weight byte (Q4_0 decode was compute-bound at about half the memory bandwidth).
//
// A group of 8 rows keeps its size (8 × row_bytes), block after block, 8 × block bytes per block:
//   Q4_0, Q8_0 (32 values): bytes 0..15 the 8 rows' fp16 scales, row 0 first; then 32-byte vectors V0, V1, ...
//                (4 for Q4_0, 8 for Q8_0): byte 4l + i of Vj is byte 4j + i of row l's block after its scale.
//                Q8_0: value 4j + i. Q4_0: the low nibble is value 4j + i and the high nibble value 16 + 4j + i.
//   I8 (32 values, per-row scales outside): 8 vectors, byte 4l + i of Vj is row l's value 4j + i.
//   Q4_K (256 values): the whole 144-byte block in 36 vectors, byte 4l + i of Vj is byte 4j + i of row l's
//                block: V0 holds each row's fp16 d and dmin, V1..V3 its 12 packed scale bytes, V(4+8k+u) bytes
//                4u..4u+3 of its k-th 32 quant bytes (low nibbles: sub-block 2k, high nibbles: 2k + 1).
//   Q6_K (256 values): bytes 0..15 the 8 rows' fp16 d (the last 2 bytes of a row's block); then 52 vectors:
//                V0..V47 the values, 4 in 3 bytes, and V48..V51 the 16 int8 scales (byte 4l + i of V(48 + j) is
//                row l's scale byte 4j + i). Value vector Wv (v < 64) would hold values 4v..4v+3 of the 8 rows
//                (byte 4l + i: row l's 6-bit q of value 4v + i); each 4 of them, W(4k)..W(4k+3), are stored as
//                3: byte 4l + i of V(3k + j), j < 3, is that byte of W(4k + j) in bits 0-5 and bits 2j, 2j + 1
//                of W(4k + 3)'s in bits 6-7. A value vector then costs 2.75 instructions, not the 4.25 that
//                assembling it from the file's ql nibbles and qh bit pairs took (the same 1536 bytes either way).
//
// F32, F16, BF16 and FP8 rows in panels of 32 (WeightLayout::Panel32): panel p holds rows 32p..32p+31 as n_in
// slices, slice k the 32 rows' element k in row order (32 bytes of FP8, 64 of F16 or BF16, 128 of F32). One vector load
// then gives 8 or 16 rows at one k, which makes a float product an outer product: broadcast activations times
// weight vectors, every output element one FMA chain over k (kernels/matmul_panel_inl.h).
//
// BF16 panels with bf16 products (WeightMatrix::bf16_products) pair their k's instead (pair_bf16_panels): for
// each pair q (k = 2q and 2q + 1), 128 bytes hold the 32 rows' pair words in row order, row l's at bytes 4l..4l+3
// with k = 2q in the low half; an odd n_in's last k keeps its slice (64 bytes). A pair word is what vdpbf16ps
// multiplies and what an AMX-BF16 B tile holds (16 pair words a tile row), so the bf16 products load their
// weights as they lie (matmul_bf16_avx512.cpp, matmul_bf16_amx.cpp). The fp32 path reads slices faster (one
// AVX-512 thread streaming a BF16 matrix from memory at one token read 16 GB/s from slices against 12 from pairs,
// Intel Xeon), and reads pairs only where such a matrix runs at a level without AVX-512 BF16.
//
// The bytes are the file's bytes, moved (Q6_K's values repacked into as many bytes): rewriting in place keeps the
// memory footprint.
#pragma once

#include <cstdint>

#include "kernels/matmul_kernels.h"
#include "kernels/weight_matrix.h"

namespace tessera {

constexpr int kInterleaveRows = 8;
using kernels::kPanelRows;

// Whether w can be rewritten for its kernels: Q4_0, Q8_0, I8 (without LLM.int8() outliers), Q4_K or Q6_K in the
// Rows layout, a multiple of 8 rows of whole blocks (to Interleaved8); F32, F16, BF16 or FP8 in the Rows
// layout, a multiple of 32 rows (to Panel32).
bool can_interleave(const WeightMatrix& w);

// The layout interleave_rows gives a matrix of `type`.
WeightLayout interleaved_layout(TensorType type);

// Rewrites the matrix at data (n_out rows of `type`, one of can_interleave's types and shapes) into
// interleaved_layout(type).
void interleave_rows(TensorType type, uint8_t* data, int64_t n_out, int64_t n_in);

// The n F16 values at data (2 bytes each, in any order) rewritten in place as BF16, rounded to nearest even
// (8 significant bits of 11; a NaN stays a NaN): LoadOptions::bf16_products' rounding of F16 panels. On zmm at
// the AVX-512 BF16 level (the only one that rounds them), else value by value.
void round_f16_to_bf16(uint8_t* data, size_t n);

// BF16 panels (n_out rows, n_in values, slice order) rewritten in place in pair order, for bf16 products.
void pair_bf16_panels(uint8_t* data, int64_t n_out, int64_t n_in);

// Row r of an Interleaved8 or Panel32 matrix (in pair order where w.bf16_products) as the file stored it: dst
// holds w.row_bytes bytes.
void deinterleave_row(const WeightMatrix& w, int64_t r, uint8_t* dst);

}  // namespace tessera
