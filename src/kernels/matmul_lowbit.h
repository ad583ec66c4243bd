// Linear layers over the low-bit weight types (FP8 E4M3, INT4 group-wise): matmul() routes these types here.
#pragma once

#include <cstdint>
#include <span>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace tessera {

inline bool is_lowbit_type(TensorType type) { return type == TensorType::FP8_E4M3 || type == TensorType::INT4; }

// Same contract as matmul() (kernels/matmul.h), batch invariance included. FP8 is weight-only: bytes are widened
// to fp32 in registers and multiplied with fp32 activations. INT4 quantizes each token to int8 with one scale
// (like I8) and takes int8 dot products per 32 values, scaled per group; at Isa::Scalar both run the reference.
void matmul_lowbit(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, Isa isa);

// INT4 matrices applied to the same input (q/k/v, gate/up), all with the same n_in and group size: the
// activations are quantized once and all rows run in one parallel region; ys[j] is what matmul_lowbit gives for
// ws[j], bit for bit.
void matmul_int4_shared(std::span<const WeightMatrix* const> ws, std::span<float* const> ys, const float* x,
                        int64_t n_tokens, ThreadPool& pool, Isa isa);

// Dequantize each row, sequential fp32 dot product per token (what Isa::Scalar runs).
void matmul_lowbit_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

}  // namespace tessera
