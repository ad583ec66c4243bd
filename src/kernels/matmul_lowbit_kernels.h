// Internal interface between matmul_lowbit.cpp (dispatch, activation quantization) and its ISA kernels.
// Plain data and declarations only (see matmul_kernels.h for why).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::kernels::lowbit {

inline int64_t int4_act_stride(int64_t n_in) { return ((n_in + 31) / 32 + 1) / 2 * 64; }
inline int64_t int4_sums_stride(int64_t n_groups) { return (n_groups + 7) / 8 * 8; }  // whole vectors of 8

struct LowbitArgs {
  int64_t n_in = 0, n_out = 0, n_tokens = 0;
  const uint8_t* w = nullptr;  // n_out rows of row_bytes
  size_t row_bytes = 0;
  const float* row_scales = nullptr;     // FP8: [n_out]
  int64_t group_size = 0, n_groups = 0;  // INT4
  const uint16_t* group_scales = nullptr;  // INT4: fp16 [n_out, n_groups]
  const uint16_t* group_zeros = nullptr;
  const float* x = nullptr;              // FP8: [n_tokens, n_in] fp32
  // INT4: per token, int4_act_stride(n_in) bytes: for each pair of 32-value chunks (2p, 2p+1), 64 values in
  // the order the kernels unpack 32 packed weight bytes: chunk 2p values 0-15, chunk 2p+1 values 0-15, chunk 2p
  // values 16-31, chunk 2p+1 values 16-31; zeros past n_in (and for the missing partner of a lone last chunk).
  const int8_t* xq = nullptr;
  const float* x_scale = nullptr;        // INT4: [n_tokens]
  const float* group_sums = nullptr;     // INT4: [n_tokens, int4_sums_stride(n_groups)] Σ xq per group, 0-padded
  // INT4: distinct for every quantization (new_activations_id; 0: unknown); a kernel may keep what it derives
  // from xq and group_sums (the 512-bit tiles' token pairs) for as long as it stays the same.
  uint64_t acts_id = 0;
  float* y = nullptr;                    // [n_tokens, n_out]
};

// y[t, o] for all tokens and o in [row_begin, row_end); each element is reduced by the same operations in the
// same order whatever the tile it falls in, so any row split and any batch give identical bits.
namespace avx2 {
void fp8_rows(const LowbitArgs& args, int64_t row_begin, int64_t row_end);
// Group 32 or a multiple of 64 (other multiples of 32 run the reference).
void int4_rows(const LowbitArgs& args, int64_t row_begin, int64_t row_end);
// Tokens [t_begin, t_end) of x [n_tokens, n_in] → xq (layout above), x_scale and group_sums.
void int4_quantize_acts(const float* x, int64_t n_in, int64_t group, int64_t t_begin, int64_t t_end, int8_t* q,
                        float* scale, float* group_sums);
}  // namespace avx2

namespace avx512 {
// INT4 for two tokens or more, bit-identical to avx2::int4_rows (groups as there).
void int4_batch_rows(const LowbitArgs& args, int64_t row_begin, int64_t row_end);
}  // namespace avx512

}  // namespace tessera::kernels::lowbit
