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

}  // namespace tessera
