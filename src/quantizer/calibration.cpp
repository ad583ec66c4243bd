// A plain one-sequence fp32 forward pass (contiguous K/V, no paging) that records each linear layer's input.
// It mirrors model/forward.cpp op for op; a test checks that the logits agree.
#include "quantizer/calibration.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"
#include "kernels/lowbit.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace tessera::quant {
namespace {

void init_stats(InputStats& s, int64_t n, bool hessian) {
  s.n = n;
  s.abs_sum.assign(size_t(n), 0.0);
  if (hessian) s.hessian.assign(size_t(n * n), 0.0);
}

// Adds rows x [n_tokens, s.n]; the Hessian's rows are split across the pool (each thread owns whole rows).
void accumulate(InputStats& s, const float* x, int64_t n_tokens, ThreadPool& pool) {
  const int64_t n = s.n;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t j = 0; j < n; ++j) s.abs_sum[size_t(j)] += std::fabs(x[t * n + j]);
  s.n_tokens += n_tokens;
  if (s.hessian.empty()) return;
  pool.parallel_for(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      double* h = &s.hessian[size_t(i * n)];
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * n;
        const double xi = xt[i];
        if (xi == 0.0) continue;
        for (int64_t j = 0; j < n; ++j) h[j] += xi * xt[j];
      }
    }
  });
}

}  // namespace

std::vector<float> InputStats::mean_abs() const {
  std::vector<float> m(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) m[size_t(j)] = n_tokens ? float(abs_sum[size_t(j)] / double(n_tokens)) : 0.0f;
  return m;
}

std::vector<float> InputStats::hessian_f32() const {
  std::vector<float> h(hessian.size());
  for (size_t i = 0; i < h.size(); ++i) h[i] = n_tokens ? float(hessian[i] / double(n_tokens)) : 0.0f;
  return h;
}

std::vector<float> capture_forward(const Model& model, const std::vector<int32_t>& tokens, CalibrationStats* stats,
                                   ThreadPool& pool) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const int64_t n = int64_t(tokens.size()), d = c.n_embd, qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim;
  std::vector<float> x(static_cast<size_t>(n * d)), xn(x.size()), q(static_cast<size_t>(n * qd)), k(static_cast<size_t>(n * kvd)), v(k.size());
  std::vector<float> attn(q.size()), gate(static_cast<size_t>(n * c.n_ff)), up(gate.size()), scores(static_cast<size_t>(n));
  std::vector<float> inv_freq(static_cast<size_t>(hd / 2));
  for (int64_t i = 0; i < hd / 2; ++i) inv_freq[size_t(i)] = 1.0f / std::pow(c.rope_theta, float(2 * i) / float(hd));
  for (int64_t t = 0; t < n; ++t) dequantize_weight_row(w.token_embd, tokens[size_t(t)], &x[size_t(t * d)]);

  const int64_t group = c.n_head / c.n_head_kv;
  const float att_scale = 1.0f / std::sqrt(float(hd));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    auto* ls = stats ? &stats->layers[size_t(l)] : nullptr;
    for (int64_t t = 0; t < n; ++t) rms_norm(&x[size_t(t * d)], L.attn_norm, c.rms_eps, d, &xn[size_t(t * d)]);
    if (ls) accumulate((*ls)[int(LinearInput::AttnIn)], xn.data(), n, pool);
    matmul(L.wq, xn.data(), n, q.data(), pool);
    matmul(L.wk, xn.data(), n, k.data(), pool);
    matmul(L.wv, xn.data(), n, v.data(), pool);
    for (int64_t t = 0; t < n; ++t) {
      float* qt = &q[size_t(t * qd)];
      float* kt = &k[size_t(t * kvd)];
      float* vt = &v[size_t(t * kvd)];
      if (L.bq != nullptr) {
        for (int64_t i = 0; i < qd; ++i) qt[i] += L.bq[i];
        for (int64_t i = 0; i < kvd; ++i) kt[i] += L.bk[i];
        for (int64_t i = 0; i < kvd; ++i) vt[i] += L.bv[i];
      }
      if (L.q_norm != nullptr) {
        for (int64_t h = 0; h < c.n_head; ++h) rms_norm(qt + h * hd, L.q_norm, c.rms_eps, hd, qt + h * hd);
        for (int64_t h = 0; h < c.n_head_kv; ++h) rms_norm(kt + h * hd, L.k_norm, c.rms_eps, hd, kt + h * hd);
      }
      rope(qt, c.n_head, hd, t, inv_freq.data(), c.rope_layout);
      rope(kt, c.n_head_kv, hd, t, inv_freq.data(), c.rope_layout);
    }
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t h = 0; h < c.n_head; ++h) {
        const int64_t kvh = h / group;
        const float* qh = &q[size_t(t * qd + h * hd)];
        for (int64_t p = 0; p <= t; ++p) {
          const float* kp = &k[size_t(p * kvd + kvh * hd)];
          float s = 0.0f;
          for (int64_t i = 0; i < hd; ++i) s += qh[i] * kp[i];
          scores[size_t(p)] = s * att_scale;
        }
        softmax(scores.data(), t + 1);
        float* out = &attn[size_t(t * qd + h * hd)];
        std::fill(out, out + hd, 0.0f);
        for (int64_t p = 0; p <= t; ++p) {
          const float* vp = &v[size_t(p * kvd + kvh * hd)];
          for (int64_t i = 0; i < hd; ++i) out[i] += scores[size_t(p)] * vp[i];
        }
      }
    }
    if (ls) accumulate((*ls)[int(LinearInput::AttnOut)], attn.data(), n, pool);
    matmul(L.wo, attn.data(), n, xn.data(), pool);
    for (size_t i = 0; i < x.size(); ++i) x[i] += xn[i];
    for (int64_t t = 0; t < n; ++t) rms_norm(&x[size_t(t * d)], L.ffn_norm, c.rms_eps, d, &xn[size_t(t * d)]);
    if (ls) accumulate((*ls)[int(LinearInput::FfnIn)], xn.data(), n, pool);
    matmul(L.w_gate, xn.data(), n, gate.data(), pool);
    matmul(L.w_up, xn.data(), n, up.data(), pool);
    swiglu(gate.data(), up.data(), n * c.n_ff, gate.data());
    if (ls) accumulate((*ls)[int(LinearInput::FfnMid)], gate.data(), n, pool);
    matmul(L.w_down, gate.data(), n, xn.data(), pool);
    for (size_t i = 0; i < x.size(); ++i) x[i] += xn[i];
  }
  for (int64_t t = 0; t < n; ++t) rms_norm(&x[size_t(t * d)], w.output_norm, c.rms_eps, d, &xn[size_t(t * d)]);
  std::vector<float> logits(static_cast<size_t>(n * c.n_vocab));
  matmul(w.output, xn.data(), n, logits.data(), pool);
  return logits;
}

CalibrationStats calibrate(const Model& model, const std::string& text, const CalibrationOptions& options,
                           ThreadPool& pool) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) fail("calibration text is empty");
  const ModelConfig& c = model.config();
  const std::vector<int32_t> all = model.tokenizer().encode(text, false);
  if (int64_t(all.size()) < kMinCalibrationTokens) {
    fail("calibration text is too short: {} tokens, at least {} are needed", all.size(), kMinCalibrationTokens);
  }
  const int64_t window = std::max<int64_t>(2, std::min(options.sample_tokens, c.n_ctx_train));
  CalibrationStats stats;
  stats.layers.resize(size_t(c.n_layer));
  for (auto& layer : stats.layers) {
    init_stats(layer[int(LinearInput::AttnIn)], c.n_embd, options.hessian);
    init_stats(layer[int(LinearInput::AttnOut)], c.q_dim(), options.hessian);
    init_stats(layer[int(LinearInput::FfnIn)], c.n_embd, options.hessian);
    init_stats(layer[int(LinearInput::FfnMid)], c.n_ff, options.hessian);
  }
  const int32_t bos = model.tokenizer().vocab().bos;
  for (size_t begin = 0; begin < all.size() && stats.n_samples < options.n_samples; begin += size_t(window - 1)) {
    std::vector<int32_t> tokens{bos};
    const size_t end = std::min(all.size(), begin + size_t(window - 1));
    tokens.insert(tokens.end(), all.begin() + long(begin), all.begin() + long(end));
    if (tokens.size() < 16 && stats.n_samples > 0) break;  // a tiny tail adds nothing
    capture_forward(model, tokens, &stats, pool);
    stats.n_tokens += int64_t(tokens.size());
    ++stats.n_samples;
  }
  return stats;
}

}  // namespace tessera::quant
