// Llama-3 RoPE frequency factors, from the scheme's definition (Meta's Llama 3.1 release): wavelengths are
// compared with the original training context.
#include "model/rope_scaling.h"

#include <cmath>
#include <numbers>

namespace tessera {

std::vector<float> llama3_rope_factors(int64_t head_dim, double theta, const Llama3RopeScaling& s) {
  const double low_freq_wavelen = double(s.original_context) / s.low_freq_factor;
  const double high_freq_wavelen = double(s.original_context) / s.high_freq_factor;
  std::vector<float> factors(size_t(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * double(i) / double(head_dim));
    const double wavelen = 2.0 * std::numbers::pi / inv_freq;
    double divisor = 1.0;
    if (wavelen > low_freq_wavelen) {
      divisor = s.factor;
    } else if (wavelen >= high_freq_wavelen) {
      // smooth = 1 at the high-frequency edge (keep), 0 at the low-frequency edge (divide by factor).
      const double smooth =
          (double(s.original_context) / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      divisor = 1.0 / ((1.0 - smooth) / s.factor + smooth);
    }
    factors[size_t(i)] = float(divisor);
  }
  return factors;
}

}  // namespace tessera
