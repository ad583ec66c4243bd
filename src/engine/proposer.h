// The proposer side of speculative decoding: something that guesses, for each decoding sequence, the next few
// tokens (and the distribution each guess was drawn from) before the step that verifies them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling_params.h"
#include "sched/sequence.h"

namespace tessera {

// One sequence's request for a draft.
struct DraftSlot {
  Sequence* seq = nullptr;  // decoding; the proposer writes up to k tokens into seq->draft (none: no guess)
  const SamplingParams* sampling = nullptr;  // the request's: a draft model samples as the target would
  uint64_t seed = 0;                         // for a draft model's own sampler (a stream apart from the target's)
  int64_t k = 0;
  // Out: per draft token, the distribution q it was drawn from, dense over the vocabulary; left empty for a
  // point mass on the token (n-gram lookup, greedy drafting), which the verification rule treats exactly.
  std::vector<std::vector<float>>* q = nullptr;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Fills each slot's draft. Never fails a request: a sequence it cannot guess for gets an empty draft.
  virtual void propose(std::span<DraftSlot> slots) = 0;
  // The sequence ended or was preempted: drop what is kept for it (a draft model's cache blocks).
  virtual void forget(uint64_t seq_id) { (void)seq_id; }
  // Estimated seconds of one propose() for n_seqs sequences of k tokens each, from the proposer's own measured
  // costs: part of the engine's per-step decision whether to speculate.
  virtual double estimate_seconds(int64_t n_seqs, int64_t k) const = 0;
  // KV blocks of the proposer's own cache held now (a draft model's; 0 for prompt lookup).
  virtual int64_t n_blocks_used() const { return 0; }
};

}  // namespace tessera
