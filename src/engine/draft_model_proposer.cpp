// Catch up, then k rounds of one token per drafting sequence.
#include "engine/draft_model_proposer.h"

#include <algorithm>
#include <chrono>

namespace tessera {

DraftModelProposer::DraftModelProposer(std::shared_ptr<const Model> draft, ThreadPool& pool, int64_t n_blocks,
                                       int64_t block_size, KvType kv_type)
    : model_(draft),
      kv_(draft->config().n_layer, draft->config().n_head_kv, draft->config().head_dim, n_blocks, block_size, kv_type),
      blocks_(n_blocks, block_size, /*prefix_caching=*/false),
      forward_(draft, kv_, pool) {}

bool DraftModelProposer::reserve(State& st, int64_t n_positions) {
  const int64_t bs = blocks_.block_size();
  while (int64_t(st.block_table.size()) * bs < n_positions) {
    const auto block = blocks_.allocate();
    if (!block) {
      release(st);
      return false;
    }
    st.block_table.push_back(*block);
  }
  // Blocks past the positions this round writes held rejected guesses only.
  while ((int64_t(st.block_table.size()) - 1) * bs >= n_positions) {
    blocks_.release(st.block_table.back());
    st.block_table.pop_back();
  }
  return true;
}

void DraftModelProposer::release(State& st) {
  for (int32_t b : st.block_table) blocks_.release(b);
  st.block_table.clear();
  st.computed.clear();
}

void DraftModelProposer::forget(uint64_t seq_id) {
  if (auto it = states_.find(seq_id); it != states_.end()) {
    release(*it->second);
    states_.erase(it);
  }
}

std::span<const float> DraftModelProposer::run_batch() {
  const auto start = std::chrono::steady_clock::now();
  const auto logits = forward_.run(batch_);
  cost_.observe(batch_.size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return logits;
}

void DraftModelProposer::propose(std::span<DraftSlot> slots) {
  if (slots.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  const auto n_vocab = size_t(model_->config().n_vocab);
  const int64_t n_ctx = model_->config().n_ctx_train;
  // The drafting sequences of this step and the state of each.
  std::vector<DraftSlot*> live;
  std::vector<State*> states;
  batch_.clear();
  for (DraftSlot& slot : slots) {
    Sequence& seq = *slot.seq;
    seq.draft.clear();
    slot.q->clear();
    const auto len = int64_t(seq.tokens.size());
    if (len + slot.k - 1 > n_ctx) continue;  // past the draft's context: no guess
    auto& owned = states_[seq.id];
    if (!owned) {
      SamplingParams params = *slot.sampling;
      params.seed = slot.seed;
      // min_tokens holds the draft's end tokens back too, or its guesses would end where the target cannot.
      owned = std::make_unique<State>(params, end_tokens_for(params, model_->tokenizer(), seq.n_prompt));
    }
    State& st = *owned;
    // Roll back to what the target kept: the longest common prefix, leaving at least the last token to run.
    const auto common = size_t(std::mismatch(st.computed.begin(), st.computed.end(), seq.tokens.begin(),
                                              seq.tokens.end()).first - st.computed.begin());
    st.computed.resize(std::min<size_t>(common, size_t(len - 1)));
    // Positions written this step: the catch-up tokens, then k - 1 guesses (the last guess is never run).
    if (!reserve(st, len + slot.k - 1)) continue;
    const int32_t s = batch_.add_sequence(st.block_table);
    for (auto i = int64_t(st.computed.size()); i < len; ++i)
      batch_.add_token(seq.tokens[size_t(i)], int32_t(i), s, i == len - 1);
    st.computed.assign(seq.tokens.begin(), seq.tokens.end());
    live.push_back(&slot);
    states.push_back(&st);
  }
  std::vector<int32_t> history;
  for (int64_t round = 0; !live.empty(); ++round) {
    const auto logits = run_batch();
    batch_.clear();
    std::vector<DraftSlot*> next;
    std::vector<State*> next_states;
    for (size_t j = 0; j < live.size(); ++j) {
      DraftSlot& slot = *live[j];
      State& st = *states[j];
      Sequence& seq = *slot.seq;
      history.assign(seq.tokens.begin(), seq.tokens.end());
      history.insert(history.end(), seq.draft.begin(), seq.draft.end());
      st.sampler.prepare(logits.subspan(j * n_vocab, n_vocab), history);
      const int32_t token = st.sampler.draw().id;
      seq.draft.push_back(token);
      if (!slot.sampling->is_greedy()) st.sampler.probabilities(slot.q->emplace_back());
      if (int64_t(seq.draft.size()) < slot.k) {
        const auto pos = int64_t(st.computed.size());
        batch_.add_token(token, int32_t(pos), batch_.add_sequence(st.block_table), true);
        st.computed.push_back(token);
        next.push_back(&slot);
        next_states.push_back(&st);
      }
    }
    live.swap(next);
    states.swap(next_states);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto n = int64_t(slots.size());
  const double rounds = double(slots.front().k) * cost_.seconds(n);
  catch_up_seconds_ = 0.8 * catch_up_seconds_ + 0.2 * std::max(0.0, seconds - rounds) / double(n);
}

void DraftModelProposer::calibrate(int64_t max_tokens) {
  const int64_t bs = blocks_.block_size();
  std::vector<int32_t> table;
  for (int64_t b = 0; b < std::min<int64_t>(blocks_.n_blocks(), (max_tokens + bs - 1) / bs); ++b) table.push_back(int32_t(b));
  const int64_t max_n = std::min<int64_t>(max_tokens, int64_t(table.size()) * bs);
  cost_.calibrate(
      [&](int64_t n) {
        // n one-token sequences at position 0 each (a decode round's shape), on blocks no state holds yet.
        batch_.clear();
        for (int64_t i = 0; i < n; ++i) {
          const int32_t s = batch_.add_sequence(std::span<const int32_t>(table).subspan(size_t(i / bs), 1));
          batch_.add_token(0, int32_t(i % bs), s, true);
        }
        const auto start = std::chrono::steady_clock::now();
        forward_.run(batch_);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      },
      max_n);
  batch_.clear();
}

double DraftModelProposer::estimate_seconds(int64_t n_seqs, int64_t k) const {
  // k rounds of n_seqs tokens, and each sequence's measured catch-up.
  return double(k) * cost_.seconds(n_seqs) + catch_up_seconds_ * double(n_seqs);
}

}  // namespace tessera
