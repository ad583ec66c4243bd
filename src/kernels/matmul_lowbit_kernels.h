// Internal interface between matmul_lowbit.cpp (dispatch, activation quantization) and its ISA kernels.
// Plain data and declarations only (see matmul_kernels.h for why).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::kernels::lowbit {

struct LowbitArgs {
  int64_t n_in = 0, n_out = 0, n_tokens = 0;
  const uint8_t* w = nullptr;  // n_out rows of row_bytes
  size_t row_bytes = 0;
  const float* row_scales = nullptr;     // FP8: [n_out]
  int64_t group_size = 0, n_groups = 0;  // INT4
  const uint16_t* group_scales = nullptr;  // INT4: fp16 [n_out, n_groups]
  const uint16_t* group_zeros = nullptr;
  const float* x = nullptr;              // FP8: [n_tokens, n_in] fp32
  const int8_t* xq = nullptr;            // INT4: [n_tokens, n_chunks * 32], zero padded
  const float* x_scale = nullptr;        // INT4: [n_tokens]
  const float* group_sums = nullptr;     // INT4: [n_tokens, n_groups] Σ xq over each group
  float* y = nullptr;                    // [n_tokens, n_out]
};

// y[t, o] for all tokens and o in [row_begin, row_end); each element is reduced by the same operations in the
// same order whatever the tile it falls in, so any row split and any batch give identical bits.
namespace avx2 {
void fp8_rows(const LowbitArgs& args, int64_t row_begin, int64_t row_end);
void int4_rows(const LowbitArgs& args, int64_t row_begin, int64_t row_end);
}  // namespace avx2

}  // namespace tessera::kernels::lowbit
