// AWQ scale search and GPTQ for INT4 group-wise weights.
#include "quantizer/int4_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/lowbit.h"

namespace tessera::quant {
namespace {

// In-place Cholesky A = L·Lᵀ (lower triangle of A, row-major n×n); false when A is not positive definite.
bool cholesky(std::vector<double>& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[size_t(j * n + j)];
    for (int64_t k = 0; k < j; ++k) d -= a[size_t(j * n + k)] * a[size_t(j * n + k)];
    if (!(d > 0.0)) return false;
    d = std::sqrt(d);
    a[size_t(j * n + j)] = d;
    for (int64_t i = j + 1; i < n; ++i) {
      double s = a[size_t(i * n + j)];
      for (int64_t k = 0; k < j; ++k) s -= a[size_t(i * n + k)] * a[size_t(j * n + k)];
      a[size_t(i * n + j)] = s / d;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) a[size_t(i * n + j)] = 0.0;
  return true;
}

// Inverse of a symmetric positive definite matrix from its Cholesky factor L: H⁻¹ = L⁻ᵀ·L⁻¹.
std::vector<double> spd_inverse(std::vector<double> h, int64_t n) {
  if (!cholesky(h, n)) fail("GPTQ: the damped Hessian is not positive definite");
  std::vector<double> linv(size_t(n * n), 0.0);  // L⁻¹, lower triangular
  for (int64_t i = 0; i < n; ++i) {
    linv[size_t(i * n + i)] = 1.0 / h[size_t(i * n + i)];
    for (int64_t j = 0; j < i; ++j) {
      double s = 0.0;
      for (int64_t k = j; k < i; ++k) s += h[size_t(i * n + k)] * linv[size_t(k * n + j)];
      linv[size_t(i * n + j)] = -s / h[size_t(i * n + i)];
    }
  }
  std::vector<double> inv(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      double s = 0.0;
      for (int64_t k = i; k < n; ++k) s += linv[size_t(k * n + i)] * linv[size_t(k * n + j)];
      inv[size_t(i * n + j)] = inv[size_t(j * n + i)] = s;
    }
  return inv;
}

}  // namespace

Int4Matrix int4_rtn(const float* w, int64_t n_out, int64_t n_in, int64_t group) {
  Int4Matrix m{n_out, n_in, group, {}, {}, {}};
  const size_t rb = int4_row_bytes(n_in), ng = size_t(int4_n_groups(n_in, group));
  m.data.resize(rb * size_t(n_out));
  m.scales.resize(ng * size_t(n_out));
  m.zeros.resize(m.scales.size());
  for (int64_t r = 0; r < n_out; ++r)
    quantize_row_int4(w + r * n_in, n_in, group, &m.data[size_t(r) * rb], &m.scales[size_t(r) * ng],
                      &m.zeros[size_t(r) * ng]);
  return m;
}

Int4Matrix int4_clip_search(const float* w, int64_t n_out, int64_t n_in, int64_t group,
                            const std::vector<float>& hessian, double max_shrink, int n_grid) {
  Int4Matrix m{n_out, n_in, group, {}, {}, {}};
  const size_t rb = int4_row_bytes(n_in), ng = size_t(int4_n_groups(n_in, group));
  m.data.assign(rb * size_t(n_out), 0);
  m.scales.resize(ng * size_t(n_out));
  m.zeros.resize(m.scales.size());
  const int steps = int(max_shrink * n_grid + 1e-9);
  std::vector<double> delta(static_cast<size_t>(group));
  for (int64_t r = 0; r < n_out; ++r) {
    const float* wr = w + r * n_in;
    for (int64_t g = 0, begin = 0; begin < n_in; ++g, begin += group) {
      const int64_t len = std::min(group, n_in - begin);
      float lo = wr[begin], hi = wr[begin];
      for (int64_t i = begin + 1; i < begin + len; ++i) lo = std::min(lo, wr[i]), hi = std::max(hi, wr[i]);
      Int4Group best;
      double best_err = std::numeric_limits<double>::infinity();
      for (int step = 0; step <= steps; ++step) {
        const float rho = 1.0f - float(step) / float(n_grid);
        const Int4Group p = step == 0 ? int4_fit_group(wr + begin, len) : int4_fit_range(lo * rho, hi * rho);
        for (int64_t i = 0; i < len; ++i) {
          delta[size_t(i)] = double(wr[begin + i]) - int4_dequantize_value(int4_quantize_value(wr[begin + i], p), p);
        }
        double err = 0.0;
        for (int64_t i = 0; i < len; ++i) {
          if (delta[size_t(i)] == 0.0) continue;
          const float* hi_row = &hessian[size_t((begin + i) * n_in + begin)];
          double s = 0.0;
          for (int64_t j = 0; j < len; ++j) s += hi_row[j] * delta[size_t(j)];
          err += delta[size_t(i)] * s;
        }
        if (err < best_err) best_err = err, best = p;
      }
      m.scales[size_t(r) * ng + size_t(g)] = fp32_to_fp16(best.scale);
      m.zeros[size_t(r) * ng + size_t(g)] = fp32_to_fp16(best.zero);
      for (int64_t i = begin; i < begin + len; ++i) int4_set(&m.data[size_t(r) * rb], i, int4_quantize_value(wr[i], best));
    }
  }
  return m;
}

std::vector<float> int4_dequantize(const Int4Matrix& m) {
  std::vector<float> out(static_cast<size_t>(m.n_out * m.n_in));
  const size_t rb = int4_row_bytes(m.n_in), ng = size_t(int4_n_groups(m.n_in, m.group));
  for (int64_t r = 0; r < m.n_out; ++r)
    dequantize_row_int4(&m.data[size_t(r) * rb], m.n_in, m.group, &m.scales[size_t(r) * ng], &m.zeros[size_t(r) * ng],
                        &out[size_t(r * m.n_in)]);
  return out;
}

Int4Matrix int4_gptq(std::vector<float> w, int64_t n_out, int64_t n_in, int64_t group,
                     const std::vector<float>& hessian, double damp) {
  const int64_t n = n_in;
  std::vector<double> h(hessian.begin(), hessian.end());
  double mean_diag = 0.0;
  for (int64_t i = 0; i < n; ++i) mean_diag += h[size_t(i * n + i)];
  mean_diag /= double(n);
  if (!(mean_diag > 0.0)) return int4_rtn(w.data(), n_out, n_in, group);  // no calibration signal
  for (int64_t i = 0; i < n; ++i) {
    if (h[size_t(i * n + i)] == 0.0) {  // a channel never active: its weights do not matter
      h[size_t(i * n + i)] = 1.0;
      for (int64_t r = 0; r < n_out; ++r) w[size_t(r * n + i)] = 0.0f;
    }
    h[size_t(i * n + i)] += damp * mean_diag;
  }
  // U upper triangular with H⁻¹ = Uᵀ·U: the transposed Cholesky factor of H⁻¹.
  std::vector<double> u = spd_inverse(std::move(h), n);
  if (!cholesky(u, n)) fail("GPTQ: the inverse Hessian is not positive definite");
  auto U = [&](int64_t i, int64_t j) { return u[size_t(j * n + i)]; };  // Uᵀ = L, so U(i, j) = L(j, i)

  Int4Matrix m{n_out, n_in, group, {}, {}, {}};
  const size_t rb = int4_row_bytes(n_in), ng = size_t(int4_n_groups(n_in, group));
  m.data.assign(rb * size_t(n_out), 0);
  m.scales.resize(ng * size_t(n_out));
  m.zeros.resize(m.scales.size());
  std::vector<Int4Group> params(static_cast<size_t>(n_out));
  std::vector<double> err(static_cast<size_t>(n_out));
  for (int64_t j = 0; j < n; ++j) {
    if (j % group == 0) {
      const int64_t g = j / group, len = std::min(group, n - j);
      for (int64_t r = 0; r < n_out; ++r) {
        params[size_t(r)] = int4_fit_group(&w[size_t(r * n + j)], len);
        m.scales[size_t(r) * ng + size_t(g)] = fp32_to_fp16(params[size_t(r)].scale);
        m.zeros[size_t(r) * ng + size_t(g)] = fp32_to_fp16(params[size_t(r)].zero);
      }
    }
    const double d = U(j, j);
    for (int64_t r = 0; r < n_out; ++r) {
      const float v = w[size_t(r * n + j)];
      const int q = int4_quantize_value(v, params[size_t(r)]);
      int4_set(&m.data[size_t(r) * rb], j, q);
      err[size_t(r)] = (double(v) - int4_dequantize_value(q, params[size_t(r)])) / d;
    }
    for (int64_t k = j + 1; k < n; ++k) {
      const double ujk = U(j, k);
      if (ujk == 0.0) continue;
      for (int64_t r = 0; r < n_out; ++r) w[size_t(r * n + k)] -= float(err[size_t(r)] * ujk);
    }
  }
  return m;
}

double output_error(const float* w, const float* w_hat, int64_t n_out, int64_t n_in, const std::vector<float>& h) {
  double total = 0.0;
  std::vector<double> delta(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out; ++r) {
    for (int64_t i = 0; i < n_in; ++i) delta[size_t(i)] = double(w[r * n_in + i]) - w_hat[r * n_in + i];
    for (int64_t i = 0; i < n_in; ++i) {
      if (delta[size_t(i)] == 0.0) continue;
      double s = 0.0;
      const float* hi = &h[size_t(i * n_in)];
      for (int64_t j = 0; j < n_in; ++j) s += hi[j] * delta[size_t(j)];
      total += delta[size_t(i)] * s;
    }
  }
  return total;
}

AwqResult awq_search(const std::vector<const std::vector<float>*>& weights, int64_t n_in,
                     const std::vector<float>& mean_abs, const std::vector<float>& hessian, int64_t group,
                     const std::vector<int64_t>& tie, bool clip, int n_grid) {
  // Tied channels share the mean of their statistics.
  std::vector<float> stat = mean_abs;
  if (!tie.empty()) {
    const int64_t n_tied = *std::max_element(tie.begin(), tie.end()) + 1;
    std::vector<double> sum(size_t(n_tied), 0.0);
    std::vector<int64_t> count(size_t(n_tied), 0);
    for (int64_t j = 0; j < n_in; ++j) {
      sum[size_t(tie[size_t(j)])] += mean_abs[size_t(j)];
      ++count[size_t(tie[size_t(j)])];
    }
    for (int64_t j = 0; j < n_in; ++j) stat[size_t(j)] = float(sum[size_t(tie[size_t(j)])] / double(count[size_t(tie[size_t(j)])]));
  }
  for (float& v : stat) v = std::max(v, 1e-6f);

  AwqResult best;
  best.error = std::numeric_limits<double>::infinity();
  std::vector<float> s(static_cast<size_t>(n_in)), scaled, h_scaled(clip ? hessian.size() : 0);
  for (int step = 0; step <= n_grid; ++step) {
    const float alpha = float(step) / float(n_grid);
    double log_sum = 0.0;
    for (int64_t j = 0; j < n_in; ++j) {
      s[size_t(j)] = std::pow(stat[size_t(j)], alpha);
      log_sum += std::log(double(s[size_t(j)]));
    }
    const float norm = float(std::exp(-log_sum / double(n_in)));
    for (float& v : s) v *= norm;
    double error = 0.0;
    for (const std::vector<float>* w : weights) {
      const int64_t n_out = int64_t(w->size()) / n_in;
      scaled.resize(w->size());
      for (int64_t r = 0; r < n_out; ++r)
        for (int64_t j = 0; j < n_in; ++j) scaled[size_t(r * n_in + j)] = (*w)[size_t(r * n_in + j)] * s[size_t(j)];
      std::vector<float> back;
      if (clip) {  // the quantizer that will be used: the clipping search on the scaled inputs' Hessian
        for (int64_t i = 0; i < n_in; ++i)
          for (int64_t j = 0; j < n_in; ++j)
            h_scaled[size_t(i * n_in + j)] = hessian[size_t(i * n_in + j)] / (s[size_t(i)] * s[size_t(j)]);
        back = int4_dequantize(int4_clip_search(scaled.data(), n_out, n_in, group, h_scaled));
      } else {
        back = int4_dequantize(int4_rtn(scaled.data(), n_out, n_in, group));
      }
      for (int64_t r = 0; r < n_out; ++r)
        for (int64_t j = 0; j < n_in; ++j) back[size_t(r * n_in + j)] /= s[size_t(j)];
      error += output_error(w->data(), back.data(), n_out, n_in, hessian);
    }
    if (step == 0) best.rtn_error = error;
    if (error < best.error) {
      best.error = error;
      best.alpha = alpha;
      best.scale = s;
    }
  }
  return best;
}

}  // namespace tessera::quant
