// The per-step decision whether speculation pays, and with how many tokens: generated tokens per second with
// k draft tokens per sequence against without, from the measured step cost (StepCost), the proposer's measured
// cost and the acceptance measured so far. Verification is nearly free while a step is bound by reading the
// weights (small batches); once the batch makes the matmuls compute-bound every draft token costs about what
// it may gain, and the decision turns speculation off for that step.
#pragma once

#include <cstdint>

#include "engine/proposer.h"
#include "engine/speculative_options.h"
#include "engine/step_cost.h"

namespace tessera {

class SpecPolicy {
 public:
  SpecPolicy(const SpeculativeOptions& options, const Proposer& proposer) : options_(options), proposer_(proposer) {}

  StepCost& step_cost() { return cost_; }
  // Draft tokens per sequence for a step in which n_spec decoding sequences may speculate, n_decode sequences
  // decode in all (n_spec of them included) and n_tokens tokens run without drafts. 0: no speculation.
  int64_t choose_k(int64_t n_spec, int64_t n_decode, int64_t n_tokens);
  // A verification judged draft tokens: `accepted` of `n_draft` kept (a shorter run means one was rejected).
  void observe(int64_t n_draft, int64_t accepted);
  // The measured probability that a judged draft token is accepted (with a prior while little is measured).
  double acceptance() const;

 private:
  SpeculativeOptions options_;
  const Proposer& proposer_;
  StepCost cost_;
  // Judged draft tokens, decayed every step so that the estimate follows the workload; while speculation is
  // off they fade, and a probe measures again now and then (a one-off bad stretch does not turn it off for good).
  double accepted_ = 0.0, judged_ = 0.0;
  bool probing_ = true;        // deciding as if acceptance were high, to measure it (spec_policy.cpp)
  double probe_until_ = 8.0;   // the probe ends once judged_ reaches this
  int64_t steps_off_ = 0;      // consecutive decisions without speculation
};

}  // namespace tessera
