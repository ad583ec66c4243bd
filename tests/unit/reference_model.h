// A deliberately naive fp64 transformer written from the equations, over plain fp32 weight arrays: the yardstick
// the engine's forward pass is checked against (reference_forward_test.cpp, hf_model_test.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"

namespace tessera::testing {

// Matrices are row-major [out][in], as Hugging Face stores them. Optional tensors are empty when absent.
struct RefLayer {
  std::vector<float> attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm, ffn_norm, w_gate, w_up, w_down;
};

struct RefModel {
  int64_t n_vocab = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0;
  double rms_eps = 1e-5;
  double rope_theta = 10000.0;
  bool rope_neox = true;               // rotate (i, i + head_dim/2) — Hugging Face's rotate_half — or (2i, 2i+1)
  std::vector<double> rope_divisors;   // [head_dim / 2] divisors of each pair's frequency; empty: none
  std::vector<float> token_embd;       // [n_vocab][n_embd]
  std::vector<float> output_norm;
  std::vector<float> output;           // [n_vocab][n_embd]; empty: tied to token_embd
  std::vector<RefLayer> layers;
};

// Logits [tokens.size()][n_vocab] for the tokens at positions 0, 1, 2, ... of one sequence.
std::vector<std::vector<double>> reference_logits(const RefModel& m, const std::vector<int32_t>& tokens);

// A Model whose weights (F32) point into `m`, which must outlive it.
std::shared_ptr<Model> model_from_reference(const RefModel& m, const std::string& architecture);

// max |expected - actual| and max |expected| over all logits; actual is [n_tokens * n_vocab].
struct LogitDiff {
  double max_diff = 0.0, max_ref = 0.0;
};
LogitDiff compare_logits(const std::vector<std::vector<double>>& expected, const std::vector<float>& actual);

}  // namespace tessera::testing
