// Transformer ops: the scalar reference versions and the dispatch to the ISA kernels.
#include "kernels/ops.h"

#include <cmath>
#include <limits>

#include "kernels/ops_kernels.h"

namespace tessera {
namespace {

Isa level_for(Isa isa) { return kernel_isa(isa < detected_isa() ? isa : detected_isa()); }
bool use_avx512(Isa isa) { return level_for(isa) == Isa::Avx512Vnni; }
bool use_avx2(Isa isa) { return level_for(isa) >= Isa::Avx2; }

// Stack room for cos/sin when rope() computes them itself; longer heads take the scalar path.
constexpr int64_t kMaxRopePairs = 512;

void rope_scalar(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin,
                 RopeLayout layout) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t a = layout == RopeLayout::Interleaved ? 2 * i : i;
      const int64_t b = layout == RopeLayout::Interleaved ? 2 * i + 1 : i + half;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * cos[i] - x1 * sin[i];
      v[b] = x0 * sin[i] + x1 * cos[i];
    }
  }
}

}  // namespace

void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out) {
  rms_norm(x, weight, eps, n, out, active_isa());
}

void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out, Isa isa) {
  if (use_avx512(isa)) return kernels::avx512::rms_norm(x, weight, eps, n, out);
  if (use_avx2(isa)) return kernels::avx2::rms_norm(x, weight, eps, n, out);
  float sum_sq = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rope_cos_sin(int64_t position, const float* inv_freq, int64_t n_pairs, float* cos, float* sin) {
  for (int64_t i = 0; i < n_pairs; ++i) {
    const float angle = static_cast<float>(position) * inv_freq[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

void rope_precomputed(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin,
                      RopeLayout layout) {
  rope_precomputed(x, n_heads, head_dim, cos, sin, layout, active_isa());
}

void rope_precomputed(float* x, int64_t n_heads, int64_t head_dim, const float* cos, const float* sin,
                      RopeLayout layout, Isa isa) {
  if (use_avx2(isa)) return kernels::avx2::rope(x, n_heads, head_dim, cos, sin, layout == RopeLayout::NeoX);
  rope_scalar(x, n_heads, head_dim, cos, sin, layout);
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t position, const float* inv_freq, RopeLayout layout) {
  rope(x, n_heads, head_dim, position, inv_freq, layout, active_isa());
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t position, const float* inv_freq, RopeLayout layout,
          Isa isa) {
  const int64_t half = head_dim / 2;
  if (half <= kMaxRopePairs) {
    float cos[kMaxRopePairs], sin[kMaxRopePairs];
    rope_cos_sin(position, inv_freq, half, cos, sin);
    return rope_precomputed(x, n_heads, head_dim, cos, sin, layout, isa);
  }
  for (int64_t i = 0; i < half; ++i) {
    float c, s;
    rope_cos_sin(position, inv_freq + i, 1, &c, &s);
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      const int64_t a = layout == RopeLayout::Interleaved ? 2 * i : i;
      const int64_t b = layout == RopeLayout::Interleaved ? 2 * i + 1 : i + half;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

void softmax(float* x, int64_t n) { softmax(x, n, active_isa()); }

void softmax(float* x, int64_t n, Isa isa) {
  if (use_avx512(isa)) return kernels::avx512::softmax(x, n);
  if (use_avx2(isa)) return kernels::avx2::softmax(x, n);
  float max_value = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max_value = std::max(max_value, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) { swiglu(gate, up, n, out, active_isa()); }

void swiglu(const float* gate, const float* up, int64_t n, float* out, Isa isa) {
  if (use_avx512(isa)) return kernels::avx512::swiglu(gate, up, n, out);
  if (use_avx2(isa)) return kernels::avx2::swiglu(gate, up, n, out);
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add(float* x, const float* y, int64_t n) { add(x, y, n, active_isa()); }

void add(float* x, const float* y, int64_t n, Isa isa) {
  if (use_avx512(isa)) return kernels::avx512::add(x, y, n);
  if (use_avx2(isa)) return kernels::avx2::add(x, y, n);
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace tessera
