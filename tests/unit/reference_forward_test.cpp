// The engine's forward pass against a deliberately naive fp64 implementation written from the equations, on
// random small models: GQA and MHA, odd sizes, both RoPE layouts, tied and untied heads, biases and QK-norm.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/thread_pool.h"
#include "engine/generator.h"
#include "model/model.h"

namespace tessera {
namespace {

struct RandomModel {
  ModelConfig config;
  std::vector<std::vector<float>> storage;  // every tensor, fp32

  const float* add(size_t n, std::mt19937& rng, float scale, float offset = 0.0f) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    storage.emplace_back(n);
    for (float& v : storage.back()) v = offset + scale * dist(rng);
    return storage.back().data();
  }
};

struct Variant {
  const char* name;
  int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
  RopeLayout rope;
  bool tied, bias, qk_norm;
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

WeightMatrix matrix(const float* data, int64_t n_out, int64_t n_in) {
  WeightMatrix w;
  w.type = TensorType::F32;
  w.n_out = n_out;
  w.n_in = n_in;
  w.data = reinterpret_cast<const uint8_t*>(data);
  w.row_bytes = size_t(n_in) * sizeof(float);
  return w;
}

std::shared_ptr<Model> make_model(const Variant& v, RandomModel& m, uint32_t seed) {
  std::mt19937 rng(seed);
  ModelConfig& c = m.config;
  c.architecture = "llama";
  c.n_vocab = v.n_vocab;
  c.n_embd = v.n_embd;
  c.n_layer = v.n_layer;
  c.n_head = v.n_head;
  c.n_head_kv = v.n_head_kv;
  c.head_dim = v.head_dim;
  c.n_ff = v.n_ff;
  c.n_ctx_train = 64;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.rope_layout = v.rope;
  c.tied_output = v.tied;
  m.storage.reserve(64);
  ModelWeights w;
  const float s = 0.3f;
  w.token_embd = matrix(m.add(size_t(c.n_vocab * c.n_embd), rng, 1.0f), c.n_vocab, c.n_embd);
  w.output_norm = m.add(size_t(c.n_embd), rng, 0.1f, 1.0f);
  w.output = v.tied ? w.token_embd : matrix(m.add(size_t(c.n_vocab * c.n_embd), rng, s), c.n_vocab, c.n_embd);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    LayerWeights L;
    L.attn_norm = m.add(size_t(c.n_embd), rng, 0.1f, 1.0f);
    L.wq = matrix(m.add(size_t(c.q_dim() * c.n_embd), rng, s), c.q_dim(), c.n_embd);
    L.wk = matrix(m.add(size_t(c.kv_dim() * c.n_embd), rng, s), c.kv_dim(), c.n_embd);
    L.wv = matrix(m.add(size_t(c.kv_dim() * c.n_embd), rng, s), c.kv_dim(), c.n_embd);
    L.wo = matrix(m.add(size_t(c.n_embd * c.q_dim()), rng, s), c.n_embd, c.q_dim());
    if (v.bias) {
      L.bq = m.add(size_t(c.q_dim()), rng, s);
      L.bk = m.add(size_t(c.kv_dim()), rng, s);
      L.bv = m.add(size_t(c.kv_dim()), rng, s);
    }
    if (v.qk_norm) {
      L.q_norm = m.add(size_t(c.head_dim), rng, 0.1f, 1.0f);
      L.k_norm = m.add(size_t(c.head_dim), rng, 0.1f, 1.0f);
    }
    L.ffn_norm = m.add(size_t(c.n_embd), rng, 0.1f, 1.0f);
    L.w_gate = matrix(m.add(size_t(c.n_ff * c.n_embd), rng, s), c.n_ff, c.n_embd);
    L.w_up = matrix(m.add(size_t(c.n_ff * c.n_embd), rng, s), c.n_ff, c.n_embd);
    L.w_down = matrix(m.add(size_t(c.n_embd * c.n_ff), rng, s), c.n_embd, c.n_ff);
    w.layers.push_back(L);
  }
  return Model::from_parts(c, w, nullptr, nullptr);
}

// ---- The naive reference: plain loops in double, straight from the definitions. ----
using Vec = std::vector<double>;

Vec mat_vec(const WeightMatrix& w, const Vec& x) {
  const float* data = reinterpret_cast<const float*>(w.data);
  Vec y(size_t(w.n_out), 0.0);
  for (int64_t o = 0; o < w.n_out; ++o)
    for (int64_t i = 0; i < w.n_in; ++i) y[size_t(o)] += double(data[o * w.n_in + i]) * x[size_t(i)];
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

void rotate(double* head, int64_t head_dim, int64_t pos, double theta, RopeLayout layout) {
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double angle = double(pos) * std::pow(theta, -2.0 * double(i) / double(head_dim));
    const int64_t a = layout == RopeLayout::Interleaved ? 2 * i : i;
    const int64_t b = layout == RopeLayout::Interleaved ? 2 * i + 1 : i + head_dim / 2;
    const double x0 = head[a], x1 = head[b];
    head[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
    head[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
  }
}

std::vector<Vec> reference_logits(const Model& model, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const auto T = int64_t(tokens.size());
  const float* embd = reinterpret_cast<const float*>(w.token_embd.data);
  std::vector<Vec> x(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) x[size_t(t)].assign(embd + tokens[size_t(t)] * c.n_embd, embd + (tokens[size_t(t)] + 1) * c.n_embd);
  for (const LayerWeights& L : w.layers) {
    std::vector<Vec> q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      const Vec xn = rms(x[size_t(t)], L.attn_norm, c.rms_eps);
      q[size_t(t)] = mat_vec(L.wq, xn);
      k[size_t(t)] = mat_vec(L.wk, xn);
      v[size_t(t)] = mat_vec(L.wv, xn);
      if (L.bq) {
        for (int64_t i = 0; i < c.q_dim(); ++i) q[size_t(t)][size_t(i)] += L.bq[i];
        for (int64_t i = 0; i < c.kv_dim(); ++i) k[size_t(t)][size_t(i)] += L.bk[i];
        for (int64_t i = 0; i < c.kv_dim(); ++i) v[size_t(t)][size_t(i)] += L.bv[i];
      }
      for (int64_t h = 0; h < c.n_head; ++h) {
        double* head = q[size_t(t)].data() + h * c.head_dim;
        if (L.q_norm) {
          Vec part(head, head + c.head_dim);
          part = rms(part, L.q_norm, c.rms_eps);
          std::copy(part.begin(), part.end(), head);
        }
        rotate(head, c.head_dim, t, c.rope_theta, c.rope_layout);
      }
      for (int64_t h = 0; h < c.n_head_kv; ++h) {
        double* head = k[size_t(t)].data() + h * c.head_dim;
        if (L.k_norm) {
          Vec part(head, head + c.head_dim);
          part = rms(part, L.k_norm, c.rms_eps);
          std::copy(part.begin(), part.end(), head);
        }
        rotate(head, c.head_dim, t, c.rope_theta, c.rope_layout);
      }
    }
    for (int64_t t = 0; t < T; ++t) {
      Vec attn(size_t(c.q_dim()), 0.0);
      for (int64_t h = 0; h < c.n_head; ++h) {
        const int64_t g = h / (c.n_head / c.n_head_kv);
        Vec scores(size_t(t + 1));
        double max_s = -1e300;
        for (int64_t p = 0; p <= t; ++p) {
          double dot = 0;
          for (int64_t i = 0; i < c.head_dim; ++i) dot += q[size_t(t)][size_t(h * c.head_dim + i)] * k[size_t(p)][size_t(g * c.head_dim + i)];
          scores[size_t(p)] = dot / std::sqrt(double(c.head_dim));
          max_s = std::max(max_s, scores[size_t(p)]);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - max_s));
        for (int64_t p = 0; p <= t; ++p)
          for (int64_t i = 0; i < c.head_dim; ++i)
            attn[size_t(h * c.head_dim + i)] += scores[size_t(p)] / sum * v[size_t(p)][size_t(g * c.head_dim + i)];
      }
      const Vec o = mat_vec(L.wo, attn);
      for (int64_t i = 0; i < c.n_embd; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
      const Vec xn = rms(x[size_t(t)], L.ffn_norm, c.rms_eps);
      const Vec gate = mat_vec(L.w_gate, xn), up = mat_vec(L.w_up, xn);
      Vec hidden(size_t(c.n_ff));
      for (int64_t i = 0; i < c.n_ff; ++i) hidden[size_t(i)] = gate[size_t(i)] / (1.0 + std::exp(-gate[size_t(i)])) * up[size_t(i)];
      const Vec down = mat_vec(L.w_down, hidden);
      for (int64_t i = 0; i < c.n_embd; ++i) x[size_t(t)][size_t(i)] += down[size_t(i)];
    }
  }
  std::vector<Vec> logits;
  for (int64_t t = 0; t < T; ++t) logits.push_back(mat_vec(w.output, rms(x[size_t(t)], w.output_norm, c.rms_eps)));
  return logits;
}

class ReferenceForward : public ::testing::TestWithParam<Variant> {};

TEST_P(ReferenceForward, EngineAgreesWithNaiveFp64) {
  const Variant& v = GetParam();
  RandomModel storage;
  auto model = make_model(v, storage, 1234);
  std::mt19937 rng(99);
  std::vector<int32_t> tokens(23);
  for (auto& t : tokens) t = int32_t(rng() % uint32_t(v.n_vocab));
  const auto expected = reference_logits(*model, tokens);

  for (int threads : {1, 2}) {
    for (int64_t chunk : {int64_t(1), int64_t(5), int64_t(64)}) {
      ThreadPool pool(threads);
      Generator generator(model, pool, 32, chunk);
      const auto logits = generator.prompt_logits(tokens);
      double max_diff = 0, max_ref = 0;
      for (size_t t = 0; t < tokens.size(); ++t) {
        for (int64_t i = 0; i < v.n_vocab; ++i) {
          const double ref = expected[t][size_t(i)];
          max_diff = std::max(max_diff, std::fabs(ref - double(logits[t * size_t(v.n_vocab) + size_t(i)])));
          max_ref = std::max(max_ref, std::fabs(ref));
        }
      }
      // fp32 accumulation over a few hundred terms: relative error well under 1e-4 of the logit scale.
      EXPECT_LT(max_diff, 1e-4 * std::max(1.0, max_ref)) << v.name << " threads=" << threads << " chunk=" << chunk;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, ReferenceForward,
    ::testing::Values(
        Variant{"mha_interleaved_untied", 32, 2, 4, 4, 8, 72, 97, RopeLayout::Interleaved, false, false, false},
        Variant{"gqa_neox_tied", 48, 2, 6, 2, 8, 37, 101, RopeLayout::NeoX, true, false, false},
        Variant{"gqa_interleaved_tied_odd", 40, 3, 5, 1, 8, 61, 53, RopeLayout::Interleaved, true, false, false},
        Variant{"mqa_neox_untied", 24, 1, 3, 1, 8, 33, 67, RopeLayout::NeoX, false, false, false},
        Variant{"qwen2_bias", 32, 2, 4, 2, 8, 45, 89, RopeLayout::NeoX, false, true, false},
        Variant{"qwen3_qknorm_headdim", 32, 2, 4, 2, 12, 45, 89, RopeLayout::NeoX, true, false, true}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessera
