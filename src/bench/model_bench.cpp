// Forward-pass timing. Token ids are fixed pseudo-random values: throughput does not depend on them, and
// drawing them costs nothing next to a forward pass.
#include "bench/model_bench.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "kernels/matmul.h"

namespace tessera {
namespace {

constexpr int64_t kBlockSize = 16;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int32_t token_for(const Model& model, int64_t seq, int64_t position) {
  const uint64_t h = (uint64_t(seq) * 1000003u + uint64_t(position)) * 0x9e3779b97f4a7c15ULL;
  const int64_t n_vocab = model.config().n_vocab;
  const int64_t first = std::min<int64_t>(3, n_vocab - 1);  // skip <unk>, <s>, </s> in Llama-style vocabularies
  return int32_t(first + int64_t((h >> 33) % uint64_t(n_vocab - first)));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

}  // namespace

PrefilledSequences::PrefilledSequences(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t n_seqs,
                                       int64_t n_prompt, int64_t extra_positions, KvType kv_type)
    : model_(std::move(model)),
      n_seqs_(n_seqs),
      blocks_per_seq_((n_prompt + extra_positions + kBlockSize - 1) / kBlockSize),
      kv_(model_->config().n_layer, model_->config().n_head_kv, model_->config().head_dim, n_seqs * blocks_per_seq_,
          kBlockSize, kv_type),
      tables_(size_t(n_seqs)),
      forward_(model_, kv_, pool) {
  for (int64_t s = 0; s < n_seqs; ++s) {
    for (int64_t b = 0; b < blocks_per_seq_; ++b) tables_[size_t(s)].push_back(int32_t(s * blocks_per_seq_ + b));
  }
  constexpr int64_t kPrefillChunk = 512;
  for (int64_t p0 = 0; p0 < n_prompt; p0 += kPrefillChunk) {
    batch_.clear();
    for (int64_t s = 0; s < n_seqs; ++s) {
      const int32_t seq = batch_.add_sequence(tables_[size_t(s)]);
      for (int64_t p = p0; p < std::min(n_prompt, p0 + kPrefillChunk); ++p) {
        batch_.add_token(token_for(*model_, s, p), int32_t(p), seq, p + 1 == n_prompt);
      }
    }
    forward_.run(batch_);
  }
}

double PrefilledSequences::step(int64_t position, int64_t n, bool logits_for_all) {
  batch_.clear();
  for (int64_t s = 0; s < n_seqs_; ++s) {
    const int32_t seq = batch_.add_sequence(tables_[size_t(s)]);
    for (int64_t i = 0; i < n; ++i) {
      batch_.add_token(token_for(*model_, s, position + i), int32_t(position + i), seq, logits_for_all || i + 1 == n);
    }
  }
  const double start = now_seconds();
  forward_.run(batch_);
  return now_seconds() - start;
}

ThroughputMeasurement measure_prefill(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t n_tokens,
                                      int reps, KvType kv_type) {
  PrefilledSequences seqs(std::move(model), pool, 1, 0, n_tokens, kv_type);
  // Untimed: the first run touches the KV pool's fresh pages and grows the workspace (page faults that a
  // serving engine pays once, and that made --quick's single prefill read up to a fifth low).
  seqs.step(0, n_tokens, false);
  ThroughputMeasurement m;
  m.n_tokens = n_tokens;
  m.runs = std::max(1, reps);
  m.seconds = 1e30;
  // Every run rewrites the same positions: each does the full prompt's work.
  for (int r = 0; r < m.runs; ++r) m.seconds = std::min(m.seconds, seqs.step(0, n_tokens, false));
  m.tokens_per_s = double(n_tokens) / m.seconds;
  return m;
}

ThroughputMeasurement measure_decode(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t batch_size,
                                     int64_t n_prompt, int64_t steps, KvType kv_type) {
  n_prompt = std::max<int64_t>(1, n_prompt);
  steps = std::max<int64_t>(1, steps);
  PrefilledSequences seqs(std::move(model), pool, batch_size, n_prompt, 1 + steps, kv_type);
  seqs.step(n_prompt);  // untimed: first use of this batch shape's workspace
  std::vector<double> times;
  for (int64_t i = 0; i < steps; ++i) times.push_back(seqs.step(n_prompt + 1 + i));

  ThroughputMeasurement m;
  m.n_tokens = batch_size;
  m.runs = steps;
  for (double t : times) m.seconds += t;
  m.median_step_seconds = median(times);
  m.tokens_per_s = double(batch_size) / m.median_step_seconds;
  return m;
}

VerifyCost measure_verify_cost(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t batch_size,
                               const std::vector<int64_t>& ks, int64_t n_prompt, int64_t rounds, KvType kv_type) {
  n_prompt = std::max<int64_t>(1, n_prompt);
  const int64_t max_k = ks.empty() ? 0 : *std::max_element(ks.begin(), ks.end());
  PrefilledSequences seqs(std::move(model), pool, batch_size, n_prompt, 1 + max_k, kv_type);
  // Each step runs k + 1 tokens per sequence at positions [n_prompt, n_prompt + k + 1), every one with logits.
  seqs.step(n_prompt);  // untimed: first use of the workspaces
  for (int64_t k : ks) seqs.step(n_prompt, k + 1);
  std::vector<double> decode;
  std::vector<std::vector<double>> verify(ks.size());
  for (int64_t r = 0; r < std::max<int64_t>(1, rounds); ++r) {
    decode.push_back(seqs.step(n_prompt));
    for (size_t i = 0; i < ks.size(); ++i) verify[i].push_back(seqs.step(n_prompt, ks[i] + 1));
  }
  VerifyCost c;
  c.decode_step_seconds = median(decode);
  for (size_t i = 0; i < ks.size(); ++i) c.verify_step_seconds.emplace_back(ks[i], median(verify[i]));
  return c;
}

uint64_t layer_matmul_elements(const Model& model) {
  auto elements = [](const WeightMatrix& m) { return uint64_t(m.n_out) * uint64_t(m.n_in); };
  uint64_t total = 0;
  for (const LayerWeights& l : model.weights().layers) {
    total += elements(l.wq) + elements(l.wk) + elements(l.wv) + elements(l.wo) + elements(l.w_gate) +
             elements(l.w_up) + elements(l.w_down);
  }
  return total;
}

bool computes_in_int8(TensorType type) {
  return type != TensorType::F32 && type != TensorType::F16 && type != TensorType::BF16 &&
         type != TensorType::FP8_E4M3;  // weight-only: widened to fp32
}

ComputePeak compute_peak_of(const Model& model) {
  const WeightMatrix& w = model.weights().layers.at(0).w_gate;
  if (takes_amx_int8_tiles(w, active_isa())) return ComputePeak::Int8Tiles;
  if (takes_amx_bf16_tiles(w, active_isa())) return ComputePeak::Bf16Tiles;
  if (computes_in_int8(w.type)) return ComputePeak::Int8;
  return model.takes_bf16_products() ? ComputePeak::Bf16 : ComputePeak::Fp32;
}

}  // namespace tessera
