// Element-wise and normalization ops of the transformer block, on fp32 rows.
#pragma once

#include <cstdint>

namespace tessera {

// out[i] = x[i] / sqrt(mean(x²) + eps) * weight[i]. out may alias x.
void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out);

enum class RopeLayout {
  Interleaved,  // rotate pairs (2i, 2i+1): Llama's original layout, GGUF arch "llama"
  NeoX,         // rotate pairs (i, i + d/2): GPT-NeoX, Qwen2/Qwen3
};

// Rotates each of n_heads head vectors (head_dim each, contiguous) of one token in place for `position`.
// inv_freq[i] = theta^(-2i/head_dim) (possibly scaled), i < head_dim/2.
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t position, const float* inv_freq, RopeLayout layout);

// In-place softmax over n values; returns nothing, handles -inf entries (masked) as probability 0.
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]. out may alias gate.
void swiglu(const float* gate, const float* up, int64_t n, float* out);

}  // namespace tessera
