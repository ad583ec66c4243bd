// Prompt lookup (n-gram) proposing: the tokens that followed the most recent earlier occurrence of the
// sequence's last n tokens (longest n first). Free to run and exact on text that copies spans of its context
// (summaries, code edits, answers quoting a document); proposes nothing where no n-gram repeats.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/proposer.h"

namespace tessera {

// The draft prompt lookup proposes after `tokens`: at most k tokens continuing the most recent earlier match of
// the longest suffix of length max_n down to min_n; empty when none matches.
std::vector<int32_t> ngram_lookup(std::span<const int32_t> tokens, int64_t k, int64_t min_n, int64_t max_n);

class NgramProposer : public Proposer {
 public:
  // A 1-token match proposes on almost every step and is wrong most of the time, each wrong guess costing
  // verification work; 2..4 tokens keep the guesses that copied text makes likely.
  static constexpr int64_t kMinN = 2, kMaxN = 4;

  void propose(std::span<DraftSlot> slots) override;
  // The lookup scans the sequence per step: measured per sequence as it runs (microseconds; ~0 beside a step).
  double estimate_seconds(int64_t n_seqs, int64_t k) const override;

 private:
  double seconds_per_seq_ = 0.0;  // moving average of a lookup's measured time
};

}  // namespace tessera
