// RoPE frequency scaling schemes that stretch a model's context: the per-dimension factors of Llama 3.1's
// "llama3" scheme, which GGUF stores as the rope_freqs.weight tensor.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_context = 8192;  // original_max_position_embeddings
};

// One divisor per rotated pair i < head_dim / 2 for the base frequency theta^(-2i/head_dim): 1 for pairs whose
// wavelength is shorter than original_context / high_freq_factor (local detail is kept), `factor` for those
// longer than original_context / low_freq_factor (they are stretched like linear scaling), and a smooth blend
// in between. This is llama.cpp's rope_freqs convention: the rotation uses inv_freq[i] / factors[i].
std::vector<float> llama3_rope_factors(int64_t head_dim, double theta, const Llama3RopeScaling& s);

}  // namespace tessera
