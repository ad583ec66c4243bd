// Outlier split and the scalar reference of the I8 mixed-precision matmul (see int8_outliers.h).
#include "kernels/int8_outliers.h"

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/error.h"

namespace tessera {

void check_int8_threshold(float threshold) {
  if (!(threshold >= 0.0f) || !std::isfinite(threshold)) {
    fail("invalid INT8 outlier threshold {}: use a finite number >= 0 (0 turns it off; LLM.int8() uses 6.0)",
         threshold);
  }
}

void split_int8_outliers(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, float threshold,
                         float* masked, int32_t* count, int32_t* col, float* val) {
  for (int64_t t = t_begin; t < t_end; ++t) {
    const float* xt = x + t * n_in;
    float* mt = masked + t * n_in;
    int32_t n = 0;
    for (int64_t i = 0; i < n_in; ++i) {
      const bool outlier = std::fabs(xt[i]) > threshold;
      mt[i] = outlier ? 0.0f : xt[i];
      if (outlier) {
        col[t * n_in + n] = int32_t(i);
        val[t * n_in + n] = xt[i];
        ++n;
      }
    }
    count[t] = n;
  }
}

void matmul_i8_outliers_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                                  ThreadPool& pool) {
  TESSERA_CHECK(w.type == TensorType::I8 && w.row_scales != nullptr);
  const int64_t n = w.n_in;
  const size_t nx = static_cast<size_t>(n_tokens * n), nt = static_cast<size_t>(n_tokens);
  std::vector<float> masked(nx), val(nx), d(nt);
  std::vector<int32_t> count(nt), col(nx);
  std::vector<int8_t> q(masked.size());
  split_int8_outliers(x, n, 0, n_tokens, w.outlier_threshold, masked.data(), count.data(), col.data(), val.data());
  for (int64_t t = 0; t < n_tokens; ++t) {
    float amax = 0.0f;
    for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(masked[size_t(t * n + i)]));
    d[size_t(t)] = amax / 127.0f;
    const float inv = d[size_t(t)] > 0.0f ? 1.0f / d[size_t(t)] : 0.0f;
    for (int64_t i = 0; i < n; ++i) q[size_t(t * n + i)] = int8_t(std::nearbyint(masked[size_t(t * n + i)] * inv));
  }
  pool.parallel_for(w.n_out, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const int8_t* wr = reinterpret_cast<const int8_t*>(w.row(o));
      for (int64_t t = 0; t < n_tokens; ++t) {
        int64_t sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += int32_t(wr[i]) * q[size_t(t * n + i)];
        float f = 0.0f;
        for (int32_t k = 0; k < count[size_t(t)]; ++k) f += val[size_t(t * n + k)] * float(wr[col[size_t(t * n + k)]]);
        y[t * w.n_out + o] = float(sum) * (w.row_scales[o] * d[size_t(t)]) + w.row_scales[o] * f;
      }
    }
  });
}

}  // namespace tessera
