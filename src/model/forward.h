// One forward pass over a flat, ragged batch of tokens from any number of sequences: prefill chunks and
// decode tokens together, no padding. Each sequence's keys and values live in KvPool blocks named by its
// block table.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kv/kv_pool.h"
#include "model/model.h"

namespace tessera {

struct ForwardBatch {
  std::vector<int32_t> tokens;        // [n_tokens]
  std::vector<int32_t> positions;     // [n_tokens] position of each token in its sequence
  std::vector<int32_t> seq_index;     // [n_tokens] index into block_tables
  std::vector<std::span<const int32_t>> block_tables;  // per sequence; must cover every position in the batch
  std::vector<int32_t> logit_indices; // tokens whose logits are returned, in this order

  void clear();
  int32_t add_sequence(std::span<const int32_t> block_table);
  void add_token(int32_t token, int32_t position, int32_t seq, bool want_logits);
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

class Forward {
 public:
  Forward(std::shared_ptr<const Model> model, KvPool& kv, ThreadPool& pool);

  // Runs the batch, writing its keys/values into the pool; returns logits [logit_indices.size(), n_vocab],
  // valid until the next call. Token ids and positions must have been validated by the caller.
  std::span<const float> run(const ForwardBatch& batch);

  const Model& model() const { return *model_; }

 private:
  void ensure_capacity(int64_t n_tokens, int64_t max_positions);
  void attention_layer(const ForwardBatch& batch, int64_t layer);
  // Calls fn(t_begin, t_end) over [0, n_tokens): on the pool's threads in even slices for a batch large enough to
  // pay for a parallel region, else inline. Each token's result does not depend on the slicing.
  template <typename Fn>
  void for_token_slices(int64_t n_tokens, Fn&& fn);
  void finish_qkv(const LayerWeights& layer, int64_t t0, int64_t t1);

  std::shared_ptr<const Model> model_;
  KvPool& kv_;
  ThreadPool& pool_;
  std::vector<float> inv_freq_;  // [head_dim / 2]

  // Workspace, grown on demand and reused: no allocation per step once warm.
  int64_t capacity_tokens_ = 0;
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, logits_in_, logits_;
  std::vector<float> rope_cos_, rope_sin_;  // [n_tokens, head_dim / 2] of this step's positions, for every layer
  std::vector<float> scratch_;   // [n_threads, attend_scratch_floats(max_positions, .., attention_run_tokens_)]
  int64_t scratch_stride_ = 0;
  int64_t attention_run_tokens_ = 1;
  int64_t attention_heads_unit_ = 1;  // attention's shares of a token's heads are cut at multiples of this
  std::vector<const uint8_t*> k_ptrs_, v_ptrs_;  // per sequence block pointers for the current layer
  std::vector<size_t> seq_ptr_offset_;
  std::vector<int64_t> attention_cost_end_;  // per token: summed attention work of the tokens up to it
};

}  // namespace tessera
