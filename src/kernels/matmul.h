// Linear layers: y = x · Wᵀ for a batch of tokens, for every supported weight type.
#pragma once

#include <cstdint>
#include <span>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace tessera {

// x: [n_tokens, w.n_in] fp32, y: [n_tokens, w.n_out] fp32.
// Batch invariance (a contract the batching engine relies on): y[t, o] is bit-identical whatever n_tokens is,
// whichever other rows x holds, and however the work is split across the pool's threads (for one ISA level).
// Quantized weight types (Q8_0, Q4_0, Q4_K, Q6_K, I8) quantize x on the fly to int8 (an fp32 scale per block of
// 32 values; per 256-value super-block for Q4_K; per token for I8) and use integer dot products, except at
// Isa::Scalar. BF16 panels marked
// bf16_products round x to bf16 and use bf16 dot products where the level (and the CPU) has AVX-512 BF16.
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// The same at an explicit ISA level (capped by what the CPU has); tests and benchmarks use it.
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, Isa isa);

// One output of matmul_shared_input: y = x · wᵀ, y sized [n_tokens, w->n_out].
struct MatmulTarget {
  const WeightMatrix* w;
  float* y;
};

// Several matrices applied to the same input (q, k and v; gate and up): the activations are quantized once and
// all rows run in one parallel region. Each y is bit-identical to what matmul() gives for its matrix.
void matmul_shared_input(std::span<const MatmulTarget> targets, const float* x, int64_t n_tokens,
                         ThreadPool& pool);
void matmul_shared_input(std::span<const MatmulTarget> targets, const float* x, int64_t n_tokens, ThreadPool& pool,
                         Isa isa);

// Whether products with w at `isa` (capped to the CPU's level) take the AMX-INT8 tiles for batches of 12 tokens or
// more (kernels/matmul_i8_amx.cpp): interleaved I8, never with LLM.int8() outliers, rows of whole 64-value steps,
// at Isa::Amx. Smaller batches, and every other matrix, take the AVX-512 kernels.
bool takes_amx_int8_tiles(const WeightMatrix& w, Isa isa);

// Whether products with w at `isa` (capped to the CPU's level) take the AMX-BF16 tiles, at every token count
// (kernels/matmul_bf16_amx.cpp): BF16 panels with bf16 products (WeightMatrix::bf16_products) at Isa::Amx.
bool takes_amx_bf16_tiles(const WeightMatrix& w, Isa isa);

// Definition of the result: dequantize each weight row, sequential fp32 dot product per token.
// This is what Isa::Scalar runs.
void matmul_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

}  // namespace tessera
