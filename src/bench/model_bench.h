// Throughput of a model's forward pass, driven through Forward directly (no sampler, no scheduler): prefill of
// one prompt, and decode steps of independent sequences stepped together in one batch over one KvPool (F16
// keys and values by default, as the server stores them).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "bench/roofline.h"
#include "core/thread_pool.h"
#include "core/kv_type.h"
#include "kv/kv_pool.h"
#include "model/forward.h"
#include "model/model.h"

namespace tessera {

// Shared machines preempt benchmark threads now and then; the best prefill run and the median decode step
// say what the code does rather than what the neighbours did.
struct ThroughputMeasurement {
  int64_t n_tokens = 0;  // tokens per run (prefill) or per step (decode batch)
  int64_t runs = 0;      // timed runs (prefill) or steps (decode)
  double seconds = 0.0;  // best run (prefill) or all timed steps together (decode)
  double median_step_seconds = 0.0;  // decode only
  double tokens_per_s = 0.0;         // n_tokens / best run (prefill) or n_tokens / median step (decode)
};

// `n_seqs` sequences over one KvPool, each prefilled with `n_prompt` tokens in chunks of 512 positions (as the
// engine's chunked prefill runs a long prompt: one forward batch of a long context's every token would need
// activations for all of them at once), with room for `extra_positions` more. Sequence s owns the consecutive
// blocks [s·n, (s+1)·n): nothing is shared or freed, so no block manager is needed. Token ids are fixed
// pseudo-random values: throughput does not depend on them.
class PrefilledSequences {
 public:
  PrefilledSequences(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t n_seqs, int64_t n_prompt,
                     int64_t extra_positions, KvType kv_type = KvType::F16);

  // One forward step of n tokens per sequence at positions [position, position + n), every one with logits (as a
  // serving engine runs decode, n = 1, or speculative verification) or only each sequence's last (a prompt);
  // returns its seconds. A step may rewrite positions an earlier one wrote: then both attend over the same
  // context.
  double step(int64_t position, int64_t n = 1, bool logits_for_all = true);

 private:
  std::shared_ptr<const Model> model_;
  int64_t n_seqs_, blocks_per_seq_;
  KvPool kv_;
  std::vector<std::vector<int32_t>> tables_;
  Forward forward_;
  ForwardBatch batch_;
};

// One prompt of n_tokens in a single forward batch (logits for the last token only), best of `reps` after an
// untimed first run.
ThroughputMeasurement measure_prefill(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t n_tokens,
                                      int reps, KvType kv_type = KvType::F16);

// `batch` sequences, each prefilled with n_prompt tokens (in chunks of 512 positions), then one untimed step and
// `steps` timed steps of one token per sequence with logits for every sequence, as a serving engine runs them.
ThroughputMeasurement measure_decode(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t batch,
                                     int64_t n_prompt, int64_t steps, KvType kv_type = KvType::F16);

// The cost of speculative verification: `batch` sequences prefilled with n_prompt tokens, then `rounds` rounds
// that each time one ordinary decode step (one token per sequence) and, right after it, one step per k in `ks`
// running k + 1 tokens per sequence (the last token and k draft tokens, every one with logits, as a verification
// chunk). Every round rewrites the same positions, so all steps attend over the same context; interleaving the
// steps within a round makes the ratios immune to the machine's drift. Medians over the rounds.
struct VerifyCost {
  double decode_step_seconds = 0.0;
  std::vector<std::pair<int64_t, double>> verify_step_seconds;  // (k, median seconds)
  double ratio(size_t i) const { return verify_step_seconds[i].second / decode_step_seconds; }
};
VerifyCost measure_verify_cost(std::shared_ptr<const Model> model, ThreadPool& pool, int64_t batch,
                               const std::vector<int64_t>& ks, int64_t n_prompt, int64_t rounds,
                               KvType kv_type = KvType::F16);

// Multiply-adds of the layer matrices per token (the work a prefill token costs; the output head runs for the
// last prompt token only). Attention scores are not counted.
uint64_t layer_matmul_elements(const Model& model);

// Types whose matmuls run as int8 dot products (activations quantized on the fly); the rest use fp32 FMA.
bool computes_in_int8(TensorType type);

// The compute peak a model's layer matrices run against: int8 where their kernels quantize the activations to
// int8 (the AMX tiles' where batches of them take tiles: interleaved I8 without outliers at Isa::Amx), bf16 where
// its BF16 matrices take bf16 products (Model::takes_bf16_products), fp32 FMA otherwise.
ComputePeak compute_peak_of(const Model& model);

}  // namespace tessera
