// Draft-model proposing: a smaller model with the target's vocabulary (typically an INT4 copy of the target)
// runs k batched forward passes per step over every drafting sequence and samples one token per pass, as the
// target would (same temperature, top-k/top-p, penalties), recording the distribution each token came from.
//
// The draft keeps its own paged KV cache (a pool and block manager of its own, no prefix sharing). What it has
// computed for a sequence is rolled back to the longest prefix the target kept: positions of rejected guesses
// are recomputed next step, and blocks past what a sequence needs go back to the pool.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "engine/proposer.h"
#include "engine/sampler.h"
#include "engine/step_cost.h"
#include "kv/block_manager.h"
#include "kv/kv_pool.h"
#include "model/forward.h"
#include "model/model.h"

namespace tessera {

class DraftModelProposer : public Proposer {
 public:
  // n_blocks of block_size positions for the draft's cache (the engine gives it as many as the target's: it
  // may hold the same sequences; pages become resident only as blocks are written).
  DraftModelProposer(std::shared_ptr<const Model> draft, ThreadPool& pool, int64_t n_blocks, int64_t block_size,
                     KvType kv_type);

  void propose(std::span<DraftSlot> slots) override;
  void forget(uint64_t seq_id) override;
  double estimate_seconds(int64_t n_seqs, int64_t k) const override;

  // Times the draft's forward passes (StepCost) on blocks nobody holds yet: call before the first propose().
  void calibrate(int64_t max_tokens);
  int64_t n_blocks_used() const override { return blocks_.n_used(); }

 private:
  struct State {
    State(const SamplingParams& p, EndTokens end) : sampler(p, std::move(end)) {}
    std::vector<int32_t> computed;  // tokens whose K/V the draft's cache holds, by position
    std::vector<int32_t> block_table;
    Sampler sampler;
  };
  // Makes `st` hold blocks for n_positions; false (and nothing held) when the draft's pool is out of blocks.
  bool reserve(State& st, int64_t n_positions);
  void release(State& st);
  // One forward pass of the batch built so far; its seconds are observed by cost_.
  std::span<const float> run_batch();

  std::shared_ptr<const Model> model_;
  KvPool kv_;
  BlockManager blocks_;
  Forward forward_;
  ForwardBatch batch_;
  StepCost cost_;
  // Measured seconds per drafting sequence beyond the k one-token rounds: catching up on what the target
  // appended, above all a new sequence's whole prompt (moving average). The rounds alone underestimate a
  // draft's cost badly where requests keep arriving (a mixed workload ran at half speed on that estimate).
  double catch_up_seconds_ = 0.0;
  std::unordered_map<uint64_t, std::unique_ptr<State>> states_;  // by Sequence::id
};

}  // namespace tessera
