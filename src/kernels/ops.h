// Element-wise and normalization ops of the transformer block, on fp32 rows.
// Each op runs at active_isa() or at an explicit level (AVX-512 kernels for rms_norm, softmax, swiglu and add,
// the AVX2 ones for rope); the scalar versions are the reference. Results depend only on the row itself, never on
// other tokens.
#pragma once

#include <cstdint>

#include "core/cpu_features.h"

namespace tessera {

// out[i] = x[i] / sqrt(mean(x²) + eps) * weight[i]. out may alias x.
void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out);
void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out, Isa isa);

enum class RopeLayout {
  Interleaved,  // rotate pairs (2i, 2i+1): Llama's original layout, GGUF arch "llama"
  NeoX,         // rotate pairs (i, i + d/2): GPT-NeoX, Qwen2/Qwen3
};

// Rotates each of n_heads head vectors (head_dim each, contiguous) of one token in place for `position`.
// inv_freq[i] = theta^(-2i/head_dim) (possibly scaled), i < head_dim/2.
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t position, const float* inv_freq, RopeLayout layout);
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t position, const float* inv_freq, RopeLayout layout,
          Isa isa);

// cos/sin of position·inv_freq[i] for i < n_pairs (= head_dim / 2): computed once per position, they serve
// every layer and both q and k through rope_precomputed, which then does no trigonometry.
void rope_cos_sin(int64_t position, const float* inv_freq, int64_t n_pairs, float* cos, float* sin);
void rope_precomputed(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin,
                      RopeLayout layout);
void rope_precomputed(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin,
                      RopeLayout layout, Isa isa);

// In-place softmax over n values; returns nothing, handles -inf entries (masked) as probability 0.
void softmax(float* x, int64_t n);
void softmax(float* x, int64_t n, Isa isa);

// out[i] = silu(gate[i]) * up[i]. out may alias gate.
void swiglu(const float* gate, const float* up, int64_t n, float* out);
void swiglu(const float* gate, const float* up, int64_t n, float* out, Isa isa);

// x[i] += y[i] (the residual stream); the sum of two floats, the same bits at every level.
void add(float* x, const float* y, int64_t n);
void add(float* x, const float* y, int64_t n, Isa isa);

}  // namespace tessera
