// LLM.int8()-style mixed precision for Tessera's I8 weights: activation columns whose magnitude exceeds a
// threshold are multiplied in fp32 against the dequantized weight column, the rest as W8A8 int8.
//
// Outliers are decided per token (per activation row), not per column of the batch as in LLM.int8(), where a
// column goes to fp16 for every row once any row exceeds the threshold there. A batch-wide column set would
// make one sequence's logits depend on which other sequences share its step, breaking the batch invariance
// the engine guarantees (kernels/matmul.h). Per token, y[t, o] depends only on x[t] and row o, as without
// outliers; the cost is a short gather per token and row instead of one dense fp16 matmul per outlier column.
//
// For token t with outlier columns O_t = {i : |x[t, i]| > threshold} (increasing i):
//   d_t = max_{i ∉ O_t} |x[t, i]| / 127,  q[t, i] = round_even(x[t, i] / d_t) for i ∉ O_t, 0 for i ∈ O_t
//   y[t, o] = (Σ_i q[t, i]·w[o, i]) · (scale[o]·d_t) + scale[o] · Σ_{i ∈ O_t} x[t, i]·w[o, i]
// (the int32 sum exact, the outlier sum in fp32 in increasing i). Taking the outliers out of the int8 part also
// takes them out of its scale, which is where most of the error drop comes from: one large column otherwise
// sets a step that rounds every other column of the token coarsely.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace tessera {

// Rejects what cannot be a threshold (negative, NaN, infinite) with tessera::Error; 0 means off.
void check_int8_threshold(float threshold);

// Splits tokens [t_begin, t_end) of x [n_tokens, n_in]: masked gets x with the outlier columns set to 0,
// count/col/val the outliers of each token (token t's at t * n_in).
void split_int8_outliers(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, float threshold,
                         float* masked, int32_t* count, int32_t* col, float* val);

// The formula above in plain scalar code (what the SIMD kernels are tested against); w must be I8.
void matmul_i8_outliers_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                                  ThreadPool& pool);

}  // namespace tessera
