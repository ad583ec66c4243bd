// Row conversion between fp32 and every weight storage type: reference (scalar) code that defines the formats.
#pragma once

#include <cstdint>

#include "core/tensor_type.h"

namespace tessera {

// True when the kernels can compute with (and dequantize) this GGUF weight type. Tessera's FP8 and INT4 types
// (kernels/lowbit.h) are bound and computed through their own path and are not listed here.
bool is_supported_weight_type(TensorType type);

// `type`, or the nearest type whose block size divides a row of n_in (Q4_K → Q4_0, Q6_K → Q8_0, then F16), as
// llama.cpp's quantizers fall back for rows the K-quants cannot hold.
TensorType fitting_weight_type(TensorType type, int64_t n_in);

// Expands n elements (a multiple of the type's block size) to fp32. For TensorType::I8, `row_scale` is the
// row's scale (ignored for other types).
void dequantize_row(TensorType type, const void* src, float* dst, int64_t n, float row_scale = 1.0f);

// Encodes n fp32 values (a multiple of the block size) into `dst`. For TensorType::I8 the row's symmetric
// scale is returned through `row_scale` (must be non-null); other types carry their scales inside the blocks.
void quantize_row(TensorType type, const float* src, void* dst, int64_t n, float* row_scale = nullptr);

// Q6_K's 256 quants of one block (q in [0, 63], value order) into ggml's planes: ql (128 bytes, the low 4 bits
// as nibbles) and qh (64 bytes, the high 2 bits as pairs), the first 192 bytes of a block. The quantizer and
// the interleaved layout's read-back (kernels/interleave.cpp) both write a block through it.
void store_q6_k_quants(const uint8_t q[256], uint8_t ql[128], uint8_t qh[64]);

}  // namespace tessera
