// The fp64 reference transformer: plain loops in double, straight from the definitions (RMSNorm, optional q/k/v
// bias, optional per-head q/k RMSNorm, RoPE in either pair layout with optional per-pair frequency divisors,
// causal softmax attention with grouped KV heads, SwiGLU).
#include "reference_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace tessera::testing {
namespace {

using Vec = std::vector<double>;

Vec mat_vec(const std::vector<float>& w, int64_t n_out, int64_t n_in, const Vec& x) {
  Vec y(size_t(n_out), 0.0);
  for (int64_t o = 0; o < n_out; ++o)
    for (int64_t i = 0; i < n_in; ++i) y[size_t(o)] += double(w[size_t(o * n_in + i)]) * x[size_t(i)];
  return y;
}

Vec rms(const Vec& x, const float* weight, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * weight[i];
  return y;
}

void add(Vec& x, const std::vector<float>& bias) {
  for (size_t i = 0; i < bias.size(); ++i) x[i] += bias[i];
}

// Per-head RMSNorm (when `norm` is given) and rotation of each head of `x` for position `pos`.
void norm_and_rotate(const RefModel& m, double* x, int64_t n_heads, const std::vector<float>& norm, int64_t pos) {
  const int64_t d = m.head_dim;
  for (int64_t h = 0; h < n_heads; ++h) {
    double* head = x + h * d;
    if (!norm.empty()) {
      const Vec part = rms(Vec(head, head + d), norm.data(), m.rms_eps);
      std::copy(part.begin(), part.end(), head);
    }
    for (int64_t i = 0; i < d / 2; ++i) {
      double freq = std::pow(m.rope_theta, -2.0 * double(i) / double(d));
      if (!m.rope_divisors.empty()) freq /= m.rope_divisors[size_t(i)];
      const double angle = double(pos) * freq;
      const int64_t a = m.rope_neox ? i : 2 * i;
      const int64_t b = m.rope_neox ? i + d / 2 : 2 * i + 1;
      const double x0 = head[a], x1 = head[b];
      head[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
      head[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
    }
  }
}

}  // namespace

std::vector<std::vector<double>> reference_logits(const RefModel& m, const std::vector<int32_t>& tokens) {
  const auto T = int64_t(tokens.size());
  const int64_t q_dim = m.n_head * m.head_dim, kv_dim = m.n_head_kv * m.head_dim, d = m.head_dim;
  std::vector<Vec> x(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const float* row = m.token_embd.data() + tokens[size_t(t)] * m.n_embd;
    x[size_t(t)].assign(row, row + m.n_embd);
  }
  for (const RefLayer& L : m.layers) {
    std::vector<Vec> q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      const Vec xn = rms(x[size_t(t)], L.attn_norm.data(), m.rms_eps);
      q[size_t(t)] = mat_vec(L.wq, q_dim, m.n_embd, xn);
      k[size_t(t)] = mat_vec(L.wk, kv_dim, m.n_embd, xn);
      v[size_t(t)] = mat_vec(L.wv, kv_dim, m.n_embd, xn);
      add(q[size_t(t)], L.bq);
      add(k[size_t(t)], L.bk);
      add(v[size_t(t)], L.bv);
      norm_and_rotate(m, q[size_t(t)].data(), m.n_head, L.q_norm, t);
      norm_and_rotate(m, k[size_t(t)].data(), m.n_head_kv, L.k_norm, t);
    }
    for (int64_t t = 0; t < T; ++t) {
      Vec attn(size_t(q_dim), 0.0);
      for (int64_t h = 0; h < m.n_head; ++h) {
        const int64_t g = h / (m.n_head / m.n_head_kv);
        Vec scores(size_t(t + 1));
        double max_s = -1e300;
        for (int64_t p = 0; p <= t; ++p) {
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += q[size_t(t)][size_t(h * d + i)] * k[size_t(p)][size_t(g * d + i)];
          scores[size_t(p)] = dot / std::sqrt(double(d));
          max_s = std::max(max_s, scores[size_t(p)]);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - max_s));
        for (int64_t p = 0; p <= t; ++p)
          for (int64_t i = 0; i < d; ++i)
            attn[size_t(h * d + i)] += scores[size_t(p)] / sum * v[size_t(p)][size_t(g * d + i)];
      }
      const Vec o = mat_vec(L.wo, m.n_embd, q_dim, attn);
      for (int64_t i = 0; i < m.n_embd; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
      const Vec xn = rms(x[size_t(t)], L.ffn_norm.data(), m.rms_eps);
      const Vec gate = mat_vec(L.w_gate, m.n_ff, m.n_embd, xn), up = mat_vec(L.w_up, m.n_ff, m.n_embd, xn);
      Vec hidden(size_t(m.n_ff));
      for (int64_t i = 0; i < m.n_ff; ++i) hidden[size_t(i)] = gate[size_t(i)] / (1.0 + std::exp(-gate[size_t(i)])) * up[size_t(i)];
      const Vec down = mat_vec(L.w_down, m.n_embd, m.n_ff, hidden);
      for (int64_t i = 0; i < m.n_embd; ++i) x[size_t(t)][size_t(i)] += down[size_t(i)];
    }
  }
  const std::vector<float>& head = m.output.empty() ? m.token_embd : m.output;
  std::vector<Vec> logits;
  for (int64_t t = 0; t < T; ++t) {
    logits.push_back(mat_vec(head, m.n_vocab, m.n_embd, rms(x[size_t(t)], m.output_norm.data(), m.rms_eps)));
  }
  return logits;
}

std::shared_ptr<Model> model_from_reference(const RefModel& m, const std::string& architecture) {
  auto matrix = [](const std::vector<float>& data, int64_t n_out, int64_t n_in) {
    WeightMatrix w;
    w.type = TensorType::F32;
    w.n_out = n_out;
    w.n_in = n_in;
    w.data = reinterpret_cast<const uint8_t*>(data.data());
    w.row_bytes = size_t(n_in) * sizeof(float);
    return w;
  };
  auto optional = [](const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
  ModelConfig c;
  c.architecture = architecture;
  c.n_vocab = m.n_vocab;
  c.n_embd = m.n_embd;
  c.n_layer = int64_t(m.layers.size());
  c.n_head = m.n_head;
  c.n_head_kv = m.n_head_kv;
  c.head_dim = m.head_dim;
  c.n_ff = m.n_ff;
  c.n_ctx_train = 64;
  c.rms_eps = float(m.rms_eps);
  c.rope_theta = float(m.rope_theta);
  c.rope_layout = m.rope_neox ? RopeLayout::NeoX : RopeLayout::Interleaved;
  c.tied_output = m.output.empty();
  ModelWeights w;
  w.token_embd = matrix(m.token_embd, c.n_vocab, c.n_embd);
  w.output_norm = m.output_norm.data();
  w.output = c.tied_output ? w.token_embd : matrix(m.output, c.n_vocab, c.n_embd);
  for (const RefLayer& L : m.layers) {
    LayerWeights l;
    l.attn_norm = L.attn_norm.data();
    l.wq = matrix(L.wq, c.q_dim(), c.n_embd);
    l.wk = matrix(L.wk, c.kv_dim(), c.n_embd);
    l.wv = matrix(L.wv, c.kv_dim(), c.n_embd);
    l.wo = matrix(L.wo, c.n_embd, c.q_dim());
    l.bq = optional(L.bq);
    l.bk = optional(L.bk);
    l.bv = optional(L.bv);
    l.q_norm = optional(L.q_norm);
    l.k_norm = optional(L.k_norm);
    l.ffn_norm = L.ffn_norm.data();
    l.w_gate = matrix(L.w_gate, c.n_ff, c.n_embd);
    l.w_up = matrix(L.w_up, c.n_ff, c.n_embd);
    l.w_down = matrix(L.w_down, c.n_embd, c.n_ff);
    w.layers.push_back(l);
  }
  // A tokenizer of the model's vocabulary size (pieces "t<id>", no BOS): the engine binds one to every request, and a null
  // one was a null reference, which the sanitizer build reported. The logits do not depend on it.
  Vocab vocab;
  vocab.model = "llama";
  vocab.add_bos = false;
  vocab.unk = 0;  // "t0": what text without a piece of its own becomes
  for (int64_t i = 0; i < m.n_vocab; ++i) {
    vocab.tokens.push_back("t" + std::to_string(i));
    vocab.scores.push_back(-float(i));
    vocab.kinds.push_back(i == 0 ? TokenKind::Unknown : TokenKind::Normal);
  }
  return Model::from_parts(c, w, make_tokenizer(std::move(vocab)), nullptr);
}

LogitDiff compare_logits(const std::vector<std::vector<double>>& expected, const std::vector<float>& actual) {
  LogitDiff d;
  size_t at = 0;
  for (const auto& row : expected) {
    for (double ref : row) {
      d.max_diff = std::max(d.max_diff, std::fabs(ref - double(actual.at(at++))));
      d.max_ref = std::max(d.max_ref, std::fabs(ref));
    }
  }
  return d;
}

}  // namespace tessera::testing
