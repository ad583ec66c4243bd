// The Llama-family block: RMSNorm → QKV (+bias, +QK-norm) → RoPE → paged attention → output projection →
// residual → RMSNorm → SwiGLU FFN → residual. Matrix products run once over all tokens of the step.
#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "kernels/lowbit.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

namespace tessera {

void ForwardBatch::clear() {
  tokens.clear();
  positions.clear();
  seq_index.clear();
  block_tables.clear();
  logit_indices.clear();
}

int32_t ForwardBatch::add_sequence(std::span<const int32_t> block_table) {
  block_tables.push_back(block_table);
  return static_cast<int32_t>(block_tables.size() - 1);
}

void ForwardBatch::add_token(int32_t token, int32_t position, int32_t seq, bool want_logits) {
  if (want_logits) logit_indices.push_back(static_cast<int32_t>(tokens.size()));
  tokens.push_back(token);
  positions.push_back(position);
  seq_index.push_back(seq);
}

Forward::Forward(std::shared_ptr<const Model> model, KvPool& kv, ThreadPool& pool)
    : model_(std::move(model)), kv_(kv), pool_(pool) {
  const ModelConfig& c = model_->config();
  inv_freq_.resize(size_t(c.head_dim / 2));
  const float* factors = model_->weights().rope_freqs;
  for (int64_t i = 0; i < c.head_dim / 2; ++i) {
    float f = 1.0f / std::pow(c.rope_theta, float(2 * i) / float(c.head_dim)) * c.rope_freq_scale;
    if (factors != nullptr) f /= factors[i];
    inv_freq_[size_t(i)] = f;
  }
  // Chunks of a decode step's heads cut at the attention kernel's heads unit run whole register passes (cut at
  // every 2 heads, a TinyLlama decode's calls had filled 2 of 16 lanes and widened each K/V row four times). With
  // fewer whole units in a token's heads than threads (one token on many cores), smaller ones, down to one kv
  // head's group, so every thread has a share.
  const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, 1.0f};
  attention_heads_unit_ = attend_heads_unit(shape);
  while (attention_heads_unit_ > c.n_head / c.n_head_kv && c.n_head / attention_heads_unit_ < pool_.size()) {
    attention_heads_unit_ /= 2;
  }
}

void Forward::ensure_capacity(int64_t n_tokens, int64_t max_positions) {
  const ModelConfig& c = model_->config();
  if (n_tokens > capacity_tokens_) {
    capacity_tokens_ = n_tokens;
    const auto n = size_t(n_tokens);
    x_.resize(n * c.n_embd);
    xn_.resize(n * c.n_embd);
    q_.resize(n * c.q_dim());
    k_.resize(n * c.kv_dim());
    v_.resize(n * c.kv_dim());
    attn_.resize(n * c.q_dim());
    gate_.resize(n * c.n_ff);
    up_.resize(n * c.n_ff);
    rope_cos_.resize(n * size_t(c.head_dim / 2));
    rope_sin_.resize(n * size_t(c.head_dim / 2));
  }
  const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, 1.0f};
  // Prompt tokens share attention calls in runs of up to attention_run_tokens_, as many as keep one call's
  // scores within ~1 MiB (all 8 for TinyLlama up to ~4k positions).
  const int64_t group = c.n_head / c.n_head_kv;
  attention_run_tokens_ = std::clamp<int64_t>((int64_t{1} << 18) / (group * (max_positions + 8)), 1, 8);
  const int64_t scratch_floats = attend_scratch_floats(max_positions, shape, attention_run_tokens_);
  if (scratch_floats > scratch_stride_) {
    scratch_stride_ = scratch_floats;
    scratch_.resize(size_t(pool_.size()) * size_t(scratch_floats));
  }
}

// Attention's work is shared out in about this many chunks per thread's share (see attention_layer).
constexpr int64_t kAttentionChunksPerShare = 8;

// Below this many tokens (decode steps) the element-wise work between products is a few microseconds, less than
// a parallel region's start and end cost.
constexpr int64_t kParallelElementwiseTokens = 4;

template <typename Fn>
void Forward::for_token_slices(int64_t n_tokens, Fn&& fn) {
  if (n_tokens < kParallelElementwiseTokens || pool_.size() == 1) return fn(int64_t{0}, n_tokens);
  pool_.run([&](int thread, int n_threads) {
    fn(n_tokens * thread / n_threads, n_tokens * (thread + 1) / n_threads);
  });
}

void Forward::attention_layer(const ForwardBatch& batch, int64_t layer) {
  const ModelConfig& c = model_->config();
  const int64_t n_tokens = batch.size();
  const int64_t bs = kv_.block_size();

  // Store this step's keys and values, then attend: tokens of one sequence in the same step see each other
  // causally because every K/V row is written before any attention reads.
  for (int64_t t = 0; t < n_tokens; ++t) {
    const auto table = batch.block_tables[size_t(batch.seq_index[t])];
    const int64_t pos = batch.positions[t];
    kv_.store(table[size_t(pos / bs)], layer, pos % bs, &k_[size_t(t * c.kv_dim())], &v_[size_t(t * c.kv_dim())]);
  }

  seq_ptr_offset_.clear();
  k_ptrs_.clear();
  v_ptrs_.clear();
  for (const auto& table : batch.block_tables) {
    seq_ptr_offset_.push_back(k_ptrs_.size());
    for (int32_t block : table) {
      k_ptrs_.push_back(kv_.keys(block, layer));
      v_ptrs_.push_back(kv_.values(block, layer));
    }
  }

  const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(float(c.head_dim))};
  // Items are (token, query head) pairs, and an item's work grows with its token's position: threads take equal
  // shares of the summed work, not equal item counts (with a prompt's tokens in order, equal counts gave the
  // second of two threads three times the first one's work). Each item also pays a fixed cost of ~16 positions.
  constexpr int64_t kItemOverhead = 16;
  attention_cost_end_.resize(size_t(n_tokens));
  int64_t total_cost = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    total_cost += (batch.positions[t] + 1 + kItemOverhead) * c.n_head;
    attention_cost_end_[size_t(t)] = total_cost;
  }
  // The first item whose work starts at or after cost, moved to the nearest multiple of the heads unit within its
  // token (attention_heads_unit_).
  const int64_t heads_unit = attention_heads_unit_;
  const auto item_at_cost = [&](int64_t cost) -> int64_t {
    const auto it = std::upper_bound(attention_cost_end_.begin(), attention_cost_end_.end(), cost);
    if (it == attention_cost_end_.end()) return n_tokens * c.n_head;
    const int64_t t = it - attention_cost_end_.begin();
    const int64_t start = t == 0 ? 0 : attention_cost_end_[size_t(t - 1)];
    const int64_t per_head = batch.positions[t] + 1 + kItemOverhead;
    const int64_t head = (cost - start + per_head - 1) / per_head;
    return t * c.n_head + std::min(c.n_head, (head + heads_unit / 2) / heads_unit * heads_unit);
  };
  // Shared out in chunks of work, each thread starting on its own even share (parallel_for_dynamic).
  const int64_t chunk = pool_.dynamic_chunk(total_cost, kAttentionChunksPerShare);
  pool_.parallel_for_dynamic(total_cost, chunk, [&](int thread, int64_t cost_begin, int64_t cost_end) {
    float* scratch = scratch_.data() + size_t(thread) * size_t(scratch_stride_);
    const int64_t begin = item_at_cost(cost_begin);
    const int64_t end = item_at_cost(cost_end);
    for (int64_t item = begin; item < end;) {
      const int64_t t = item / c.n_head;
      const int64_t head_begin = item % c.n_head;
      const int64_t head_end = std::min(c.n_head, head_begin + (end - item));
      // Whole tokens that follow in this thread's share, of the same sequence at the next positions, join the
      // call (a prompt chunk): they read the same K/V rows.
      int64_t n = 1;
      if (head_begin == 0 && head_end == c.n_head) {
        while (n < attention_run_tokens_ && (t + n + 1) * c.n_head <= end &&
               batch.seq_index[t + n] == batch.seq_index[t] && batch.positions[t + n] == batch.positions[t] + n) {
          ++n;
        }
      }
      const size_t off = seq_ptr_offset_[size_t(batch.seq_index[t])];
      const KvBlocksView view{kv_.type(), k_ptrs_.data() + off, v_ptrs_.data() + off, bs, kv_.scales_offset()};
      attend_tokens(&q_[size_t(t * c.q_dim())], c.q_dim(), n, view, batch.positions[t] + 1, shape, head_begin,
                    head_end, scratch, &attn_[size_t(t * c.q_dim())], c.q_dim());
      item += n == 1 ? head_end - head_begin : n * c.n_head;
    }
  });
}

std::span<const float> Forward::run(const ForwardBatch& batch) {
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  const int64_t n = batch.size();
  int64_t max_positions = 1;
  for (int32_t p : batch.positions) max_positions = std::max<int64_t>(max_positions, p + 1);
  ensure_capacity(n, max_positions);

  const int64_t half = c.head_dim / 2;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = batch.tokens[t];
    dequantize_weight_row(w.token_embd, id, &x_[size_t(t * c.n_embd)]);
    // Every layer rotates q and k by the same angles: their cos and sin once per step, not per layer and head
    // (std::cos and std::sin per pair had cost ~3% of a 512-token prefill).
    rope_cos_sin(batch.positions[t], inv_freq_.data(), half, &rope_cos_[size_t(t * half)], &rope_sin_[size_t(t * half)]);
  }

  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    // x += the previous layer's FFN output (in xn_), then the attention norm.
    for_token_slices(n, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* x = &x_[size_t(t * c.n_embd)];
        float* xn = &xn_[size_t(t * c.n_embd)];
        if (l > 0) add(x, xn, c.n_embd);
        rms_norm(x, L.attn_norm, c.rms_eps, c.n_embd, xn);
      }
    });
    const MatmulTarget qkv[] = {{&L.wq, q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}};
    matmul_shared_input(qkv, xn_.data(), n, pool_);
    for_token_slices(n, [&](int64_t t0, int64_t t1) { finish_qkv(L, t0, t1); });
    attention_layer(batch, l);
    matmul(L.wo, attn_.data(), n, xn_.data(), pool_);
    for_token_slices(n, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* x = &x_[size_t(t * c.n_embd)];
        float* xn = &xn_[size_t(t * c.n_embd)];
        add(x, xn, c.n_embd);
        rms_norm(x, L.ffn_norm, c.rms_eps, c.n_embd, xn);
      }
    });
    const MatmulTarget gate_up[] = {{&L.w_gate, gate_.data()}, {&L.w_up, up_.data()}};
    matmul_shared_input(gate_up, xn_.data(), n, pool_);
    for_token_slices(n, [&](int64_t t0, int64_t t1) {
      const size_t off = size_t(t0 * c.n_ff);
      swiglu(gate_.data() + off, up_.data() + off, (t1 - t0) * c.n_ff, gate_.data() + off);
    });
    matmul(L.w_down, gate_.data(), n, xn_.data(), pool_);
  }

  // Only the tokens whose logits are wanted take the last layer's FFN output and the output norm.
  const auto n_out = int64_t(batch.logit_indices.size());
  logits_in_.resize(size_t(n_out * c.n_embd));
  logits_.resize(size_t(n_out * c.n_vocab));
  for (int64_t i = 0; i < n_out; ++i) {
    const int64_t t = batch.logit_indices[size_t(i)];
    float* x = &x_[size_t(t * c.n_embd)];
    const float* xn = &xn_[size_t(t * c.n_embd)];
    if (c.n_layer > 0) add(x, xn, c.n_embd);
    rms_norm(x, w.output_norm, c.rms_eps, c.n_embd, &logits_in_[size_t(i * c.n_embd)]);
  }
  if (n_out > 0) matmul(w.output, logits_in_.data(), n_out, logits_.data(), pool_);
  return {logits_.data(), logits_.size()};
}

// Biases, per-head q/k norms and RoPE (by the step's cos/sin table) on tokens [t0, t1) of the q/k/v products.
void Forward::finish_qkv(const LayerWeights& L, int64_t t0, int64_t t1) {
  const ModelConfig& c = model_->config();
  for (int64_t t = t0; t < t1; ++t) {
    float* q = &q_[size_t(t * c.q_dim())];
    float* k = &k_[size_t(t * c.kv_dim())];
    float* v = &v_[size_t(t * c.kv_dim())];
    if (L.bq != nullptr) {
      for (int64_t i = 0; i < c.q_dim(); ++i) q[i] += L.bq[i];
      for (int64_t i = 0; i < c.kv_dim(); ++i) k[i] += L.bk[i];
      for (int64_t i = 0; i < c.kv_dim(); ++i) v[i] += L.bv[i];
    }
    if (L.q_norm != nullptr) {
      for (int64_t h = 0; h < c.n_head; ++h) rms_norm(q + h * c.head_dim, L.q_norm, c.rms_eps, c.head_dim, q + h * c.head_dim);
      for (int64_t h = 0; h < c.n_head_kv; ++h) rms_norm(k + h * c.head_dim, L.k_norm, c.rms_eps, c.head_dim, k + h * c.head_dim);
    }
    const float* cos = &rope_cos_[size_t(t * (c.head_dim / 2))];
    const float* sin = &rope_sin_[size_t(t * (c.head_dim / 2))];
    rope_precomputed(q, c.n_head, c.head_dim, cos, sin, c.rope_layout);
    rope_precomputed(k, c.n_head_kv, c.head_dim, cos, sin, c.rope_layout);
  }
}

}  // namespace tessera
