// Internal interface of the per-ISA element-wise kernels (ops and attention). Declarations only: see
// matmul_kernels.h for why ISA files include nothing with inline functions.
#pragma once

#include <cstdint>

namespace tessera::kernels::avx2 {

void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out);
// Rotates pairs with cos/sin given per pair (head_dim / 2 values), neox: pairs (i, i + d/2), else (2i, 2i+1).
void rope(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin, bool neox);
void softmax(float* x, int64_t n);
void swiglu(const float* gate, const float* up, int64_t n, float* out);
void add(float* x, const float* y, int64_t n);

// Attention for heads [head_begin, head_end) of n_tokens consecutive tokens; same contract as
// tessera::attend_tokens. The KV view is passed as its fields so this header needs no other.
// kv_type is tessera::KvType as an int; fp8_table decodes FP8 codes (passed in so this file's inline code never
// leaks into baseline objects). packed_kv_heads: attention.h's attend_packed_kv_heads of the shape (a 16-lane
// register's kv heads); one token's call over several kv heads runs passes of half as many when it is over 1.
void attend(const float* q, int64_t q_stride, int64_t n_tokens, int kv_type, const float* fp8_table,
            const uint8_t* const* k_blocks, const uint8_t* const* v_blocks, int64_t block_size, int64_t scales_offset,
            int64_t n_pos, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, int64_t head_begin,
            int64_t head_end, float* scratch, float* out, int64_t out_stride, int64_t packed_kv_heads);

}  // namespace tessera::kernels::avx2

namespace tessera::kernels::avx512 {

void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out);
void softmax(float* x, int64_t n);
void swiglu(const float* gate, const float* up, int64_t n, float* out);
void add(float* x, const float* y, int64_t n);

// The AVX-512 attention: the same contract as avx2::attend, with its own (batch-invariant) reduction order.
// packed_kv_heads: attention.h's attend_packed_kv_heads of the shape (one token's call packs that many kv heads'
// query heads into a register when it is over 1), which also sizes the scratch and the callers' head splits.
void attend(const float* q, int64_t q_stride, int64_t n_tokens, int kv_type, const float* fp8_table,
            const uint8_t* const* k_blocks, const uint8_t* const* v_blocks, int64_t block_size, int64_t scales_offset,
            int64_t n_pos, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, int64_t head_begin,
            int64_t head_end, float* scratch, float* out, int64_t out_stride, int64_t packed_kv_heads);

}  // namespace tessera::kernels::avx512
