// Forward-pass timing. Token ids are fixed pseudo-random values: throughput does not depend on them, and
// drawing them costs nothing next to a forward pass.
#include "bench/model_bench.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "kv/kv_pool.h"
#include "model/forward.h"

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

// A pool with `n_seqs` block tables of `n_positions` positions each; sequence s owns the consecutive block ids
// [s·n, (s+1)·n): nothing is shared or freed, so no block manager is needed.
struct Sequences {
  int64_t blocks_per_seq;
  KvPool kv;
  std::vector<std::vector<int32_t>> tables;

  Sequences(const Model& model, int64_t n_seqs, int64_t n_positions, KvType kv_type)
      : blocks_per_seq((n_positions + kBlockSize - 1) / kBlockSize),
        kv(model.config().n_layer, model.config().n_head_kv, model.config().head_dim, n_seqs * blocks_per_seq,
           kBlockSize, kv_type),
        tables(size_t(n_seqs)) {
    for (int64_t s = 0; s < n_seqs; ++s) {
      for (int64_t b = 0; b < blocks_per_seq; ++b) tables[size_t(s)].push_back(int32_t(s * blocks_per_seq + b));
    }
  }
};

}  // namespace

ThroughputMeasurement measure_prefill(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t n_tokens,
                                      int reps, KvType kv_type) {
  Sequences seqs(*model, 1, n_tokens, kv_type);
  Forward forward(model, seqs.kv, pool);
  ForwardBatch batch;
  const int32_t seq = batch.add_sequence(seqs.tables[0]);
  for (int64_t p = 0; p < n_tokens; ++p) batch.add_token(token_for(*model, 0, p), int32_t(p), seq, p + 1 == n_tokens);

  // Untimed: the first run touches the KV pool's fresh pages and grows the workspace (page faults that a
  // serving engine pays once, and that made --quick's single prefill read up to a fifth low).
  forward.run(batch);
  ThroughputMeasurement m;
  m.n_tokens = n_tokens;
  m.runs = std::max(1, reps);
  m.seconds = 1e30;
  for (int r = 0; r < m.runs; ++r) {
    const double start = now_seconds();
    forward.run(batch);  // rewrites the same positions: every run does the full prompt's work
    m.seconds = std::min(m.seconds, now_seconds() - start);
  }
  m.tokens_per_s = double(n_tokens) / m.seconds;
  return m;
}

ThroughputMeasurement measure_decode(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t batch_size,
                                     int64_t n_prompt, int64_t steps, KvType kv_type) {
  n_prompt = std::max<int64_t>(1, n_prompt);
  steps = std::max<int64_t>(1, steps);
  Sequences seqs(*model, batch_size, n_prompt + 1 + steps, kv_type);
  Forward forward(model, seqs.kv, pool);
  ForwardBatch batch;

  // The prompts in chunks of positions, as the engine's chunked prefill runs a long one: one forward batch of a
  // long context's every token would need activations for all of them at once.
  constexpr int64_t kPrefillChunk = 512;
  for (int64_t p0 = 0; p0 < n_prompt; p0 += kPrefillChunk) {
    batch.clear();
    for (int64_t s = 0; s < batch_size; ++s) {
      const int32_t seq = batch.add_sequence(seqs.tables[size_t(s)]);
      for (int64_t p = p0; p < std::min(n_prompt, p0 + kPrefillChunk); ++p) {
        batch.add_token(token_for(*model, s, p), int32_t(p), seq, p + 1 == n_prompt);
      }
    }
    forward.run(batch);
  }

  auto step = [&](int64_t position) {
    batch.clear();
    for (int64_t s = 0; s < batch_size; ++s) {
      const int32_t seq = batch.add_sequence(seqs.tables[size_t(s)]);
      batch.add_token(token_for(*model, s, position), int32_t(position), seq, true);
    }
    forward.run(batch);
  };
  step(n_prompt);  // untimed: first use of this batch shape's workspace
  std::vector<double> times;
  for (int64_t i = 0; i < steps; ++i) {
    const double start = now_seconds();
    step(n_prompt + 1 + i);
    times.push_back(now_seconds() - start);
  }

  ThroughputMeasurement m;
  m.n_tokens = batch_size;
  m.runs = steps;
  for (double t : times) m.seconds += t;
  std::sort(times.begin(), times.end());
  const size_t mid = times.size() / 2;
  m.median_step_seconds = times.size() % 2 ? times[mid] : (times[mid - 1] + times[mid]) / 2;
  m.tokens_per_s = double(batch_size) / m.median_step_seconds;
  return m;
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

}  // namespace

VerifyCost measure_verify_cost(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t batch_size,
                               const std::vector<int64_t>& ks, int64_t n_prompt, int64_t rounds, KvType kv_type) {
  n_prompt = std::max<int64_t>(1, n_prompt);
  const int64_t max_k = ks.empty() ? 0 : *std::max_element(ks.begin(), ks.end());
  Sequences seqs(*model, batch_size, n_prompt + 1 + max_k, kv_type);
  Forward forward(model, seqs.kv, pool);
  ForwardBatch batch;
  for (int64_t s = 0; s < batch_size; ++s) {
    const int32_t seq = batch.add_sequence(seqs.tables[size_t(s)]);
    for (int64_t p = 0; p < n_prompt; ++p) batch.add_token(token_for(*model, s, p), int32_t(p), seq, p + 1 == n_prompt);
  }
  forward.run(batch);

  // One step of n tokens per sequence at positions [n_prompt, n_prompt + n), every one with logits.
  auto step = [&](int64_t n) {
    batch.clear();
    for (int64_t s = 0; s < batch_size; ++s) {
      const int32_t seq = batch.add_sequence(seqs.tables[size_t(s)]);
      for (int64_t i = 0; i < n; ++i) batch.add_token(token_for(*model, s, n_prompt + i), int32_t(n_prompt + i), seq, true);
    }
    const double start = now_seconds();
    forward.run(batch);
    return now_seconds() - start;
  };
  step(1);  // untimed: first use of the workspaces
  for (int64_t k : ks) step(k + 1);
  std::vector<double> decode;
  std::vector<std::vector<double>> verify(ks.size());
  for (int64_t r = 0; r < std::max<int64_t>(1, rounds); ++r) {
    decode.push_back(step(1));
    for (size_t i = 0; i < ks.size(); ++i) verify[i].push_back(step(ks[i] + 1));
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
  if (computes_in_int8(model.weights().layers.at(0).w_gate.type)) return ComputePeak::Int8;
  return model.takes_bf16_products() ? ComputePeak::Bf16 : ComputePeak::Fp32;
}

}  // namespace tessera
