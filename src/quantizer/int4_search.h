// INT4 weight quantization beyond round-to-nearest: AWQ's per-input-channel scale search and GPTQ's
// column-by-column quantization with Hessian-based error compensation. Both work on fp32 row-major matrices.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::quant {

// An INT4 matrix in Tessera's format (kernels/lowbit.h): packed rows, fp16 scales and zeros [n_out, n_groups].
struct Int4Matrix {
  int64_t n_out = 0, n_in = 0, group = 0;
  std::vector<uint8_t> data;
  std::vector<uint16_t> scales, zeros;
};

Int4Matrix int4_rtn(const float* w, int64_t n_out, int64_t n_in, int64_t group);

// AWQ's clipping search: per row and group, the range [lo·ρ, hi·ρ] (ρ = 1, 1 − 1/n_grid, ... ≥ 1 − max_shrink)
// whose round-to-nearest values minimize the group's share of the output error, δᵀ·H_gg·δ with δ = w − ŵ over
// the group's columns and H_gg that block of hessian ([n_in, n_in] = E[x xᵀ]). Clipping trades larger errors
// on a few extreme weights for a finer step on all others; ρ = 1 is plain RTN, so per group the result is never
// worse than RTN on the calibration data (cross-group terms of H are left out, as in AWQ).
Int4Matrix int4_clip_search(const float* w, int64_t n_out, int64_t n_in, int64_t group,
                            const std::vector<float>& hessian, double max_shrink = 0.5, int n_grid = 20);
std::vector<float> int4_dequantize(const Int4Matrix& m);  // [n_out, n_in]

// GPTQ: quantizes columns left to right; each column's rounding error, weighted by the inverse Hessian's
// Cholesky factor, is pushed onto the columns not yet quantized. A group's scale and zero point are fitted
// when its first column is reached, on the weights as updated so far. hessian: [n_in, n_in] = E[x xᵀ];
// damping adds damp · mean(diag) to the diagonal. Columns the calibration never saw (zero diagonal) are zeroed.
Int4Matrix int4_gptq(std::vector<float> w, int64_t n_out, int64_t n_in, int64_t group,
                     const std::vector<float>& hessian, double damp = 0.01);

// Output error of quantizing W: Σ_rows (W − Ŵ) H (W − Ŵ)ᵀ, i.e. E‖x·(W − Ŵ)ᵀ‖² over the calibration inputs.
double output_error(const float* w, const float* w_hat, int64_t n_out, int64_t n_in, const std::vector<float>& hessian);

// AWQ: for matrices that read the same input x (all [*, n_in]), the per-channel scale s = mean|x|^α (α on a grid
// in [0, 1], normalized to geometric mean 1) minimizing Σ output_error of Q(W·diag(s))·diag(1/s). α = 0 is plain
// round-to-nearest, so the result is never worse than RTN on the calibration data. `tie` (optional, [n_in])
// forces channels with the same tie value to share a scale (tie[j] in [0, n_tied)), used where the inverse
// scale can only be folded per KV channel. With `clip`, Q is int4_clip_search on the scaled inputs (the quantizer
// the result will be stored with) instead of round-to-nearest; rtn_error is then α = 0 with clipping.
struct AwqResult {
  std::vector<float> scale;  // [n_in]
  float alpha = 0.0f;
  double error = 0.0, rtn_error = 0.0;
};
AwqResult awq_search(const std::vector<const std::vector<float>*>& weights, int64_t n_in,
                     const std::vector<float>& mean_abs, const std::vector<float>& hessian, int64_t group,
                     const std::vector<int64_t>& tie = {}, bool clip = false, int n_grid = 20);

}  // namespace tessera::quant
