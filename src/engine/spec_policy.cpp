// Expected tokens per second with and without k draft tokens.
#include "engine/spec_policy.h"

#include <algorithm>
#include <cmath>

namespace tessera {
namespace {

// The estimate starts from even odds per token, weighing as much as this many judged tokens: little, so that a
// probe's few measurements decide (with 8, a measured 0.25 still read as 0.4, and a draft that lost kept
// speculating on TinyLlama F16 with an INT4 draft).
constexpr double kPriorAcceptance = 0.5;
constexpr double kPriorWeight = 2.0;
// Per-step decay of the measured counts: about the last 200 steps count.
constexpr double kDecay = 0.995;
// Probes: at the start, and after kProbeInterval steps in a row without speculation, the decision assumes this
// acceptance until kProbeTokens more tokens were judged, with one guess per sequence (the cheapest measurement).
// Without probes a proposer that costs something (a draft model) would never be tried, its acceptance never
// measured; spaced this far apart, probes that find nothing cost a few percent of the steps at most.
constexpr double kProbeTokens = 8.0;
constexpr int64_t kProbeInterval = 256;
constexpr double kProbeAcceptance = 0.9;

}  // namespace

double SpecPolicy::acceptance() const {
  return (accepted_ + kPriorAcceptance * kPriorWeight) / (judged_ + kPriorWeight);
}

void SpecPolicy::observe(int64_t n_draft, int64_t accepted) {
  // A run of `accepted` then a rejection judged accepted + 1 tokens; a full run judged them all. Counting only
  // judged tokens estimates the per-token probability of the geometric model below without bias.
  accepted_ += double(accepted);
  judged_ += double(accepted < n_draft ? accepted + 1 : accepted);
}

int64_t SpecPolicy::choose_k(int64_t n_spec, int64_t n_decode, int64_t n_tokens) {
  accepted_ *= kDecay;
  judged_ *= kDecay;
  if (n_spec <= 0) return 0;
  if (options_.switch_policy == SpecSwitch::Always) return options_.spec_tokens;
  if (probing_ && judged_ >= probe_until_) probing_ = false;
  if (!probing_ && steps_off_ >= kProbeInterval) {
    probing_ = true;
    probe_until_ = judged_ + kProbeTokens;
  }
  const double a = std::clamp(probing_ ? std::max(acceptance(), kProbeAcceptance) : acceptance(), 0.0, 0.999);
  const double plain = double(n_decode) / cost_.seconds(n_tokens);
  int64_t best_k = 0;
  double best = plain;
  for (int64_t k = 1; k <= options_.spec_tokens; ++k) {
    // Tokens a sequence gains from k guesses, each kept with probability a until the first miss, plus the
    // target's own token: (1 - a^(k+1)) / (1 - a).
    const double per_seq = (1.0 - std::pow(a, double(k + 1))) / (1.0 - a);
    const double tokens = double(n_decode - n_spec) + double(n_spec) * per_seq;
    // A probe leaves the proposer's cost out: measuring it again is part of what the probe is for (a draft
    // model's catch-up estimate, once high, would otherwise keep every later probe from running).
    const double proposer_seconds = probing_ ? 0.0 : proposer_.estimate_seconds(n_spec, k);
    const double seconds = cost_.seconds(n_tokens + n_spec * k) + proposer_seconds;
    if (const double rate = tokens / seconds; rate > best) {
      best = rate;
      best_k = k;
    }
  }
  steps_off_ = best_k == 0 ? steps_off_ + 1 : 0;
  return probing_ ? std::min<int64_t>(best_k, 1) : best_k;
}

}  // namespace tessera
