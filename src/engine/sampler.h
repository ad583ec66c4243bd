// Turns one row of logits into the next token: logit bias, min_tokens, penalties, temperature, top-k, top-p,
// min-p, then a draw from
// a seeded generator (same seed and inputs ⇒ same tokens, on any machine). Non-finite logits never make the
// draw undefined: NaN is never chosen, +inf wins over every finite logit.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace tessera {

class Tokenizer;

// A small, portable PRNG (splitmix64-seeded xoshiro256**): its sequence is fixed by the seed, unlike
// std::uniform_real_distribution whose output differs between standard libraries.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  double uniform();  // [0, 1)

 private:
  uint64_t s_[4];
};

// The indices of the k largest `values`, largest first (ties: lower index first; NaN ranks below everything).
// O(n log k) with a k-element heap and no n-sized allocation; `out` is reused.
void top_k_indices(std::span<const float> values, size_t k, std::vector<int32_t>& out);

// log Σ exp(x) over `row`, NaN entries left out; 0 when its largest entry is not finite (every entry -inf or NaN:
// nothing is likely, and each log-probability against 0 stays -inf).
float log_sum_exp(std::span<const float> row);

// A prompt position's log-probabilities (vLLM's prompt_logprobs, OpenAI's echo with logprobs): the raw model's
// distribution for the next prompt token `next` (no temperature, penalties or bias: nothing was sampled), and
// its `k` most likely tokens, most likely first.
struct PositionLogprobs {
  int64_t position = 0;  // of `token` in the prompt (set by the caller)
  int32_t token = -1;
  float logprob = 0.0f;
  int32_t rank = 1;      // of `token`: the tokens at least as likely, itself included (vLLM's)
  std::vector<std::pair<int32_t, float>> top;
};
PositionLogprobs position_logprobs(std::span<const float> row, int32_t next, size_t k, std::vector<int32_t>& scratch);

struct SampledToken {
  int32_t id = -1;
  float logprob = 0.0f;  // log-probability under the distribution actually sampled from (after temperature)
};

// What min_tokens needs beyond the parameters: where the generated tokens start in the history given to
// prepare(), and the tokens that may not end the output before min_tokens (sorted, unique).
struct EndTokens {
  int64_t n_prompt = 0;
  std::vector<int32_t> ids;
};
// The model's end-of-generation ids (unless ignore_eos) and the request's stop_token_ids; none without min_tokens.
EndTokens end_tokens_for(const SamplingParams& params, std::span<const int32_t> eog_ids, int64_t n_prompt);
// The same with the model's own ids, asked of `tokenizer` only with min_tokens (the reference tests run models
// loaded without a tokenizer).
EndTokens end_tokens_for(const SamplingParams& params, const Tokenizer& tokenizer, int64_t n_prompt);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params, EndTokens end = {});

  // `history`: the sequence so far (prompt and generated), for the penalties. Reuses internal buffers.
  // The same as prepare() then draw().
  SampledToken sample(std::span<const float> logits, std::span<const int32_t> history);

  // The distribution sample() would draw from, without drawing: logit bias, min_tokens, penalties, temperature,
  // top-k, top-p, min-p.
  // Speculative verification needs the target's probabilities before it decides what to draw.
  void prepare(std::span<const float> logits, std::span<const int32_t> history);
  // A draw from the prepared distribution (greedy: its first maximum).
  SampledToken draw();
  // The prepared distribution's probability of `id` (0 outside what top-k/top-p/min-p kept; greedy: a point
  // mass on the first maximum). O(kept tokens).
  double probability(int32_t id) const;
  // The prepared distribution as a dense vector over the vocabulary (a draft's q for the verifier).
  void probabilities(std::vector<float>& dense) const;
  // A draw from the residual max(0, p - q), renormalized (Leviathan et al. 2023): what a rejected draft token
  // is replaced by. `q`: the draft's dense distribution, or empty for a point mass on `point`. When the residual
  // has no mass (p <= q everywhere, possible only when rejection had probability 0 up to rounding), draws from p.
  SampledToken draw_residual(std::span<const float> q, int32_t point);
  // A uniform draw in [0, 1) from the sampler's own seeded stream (the accept/reject test).
  double uniform() { return rng_.uniform(); }
  bool greedy() const { return params_.is_greedy(); }

  // Log-softmax of the last penalized, temperature-scaled logits (for logprobs / top_logprobs).
  const std::vector<float>& last_logprobs();
  // One entry of last_logprobs() without materializing the vocabulary-sized vector.
  float logprob(int32_t id);
  // The k most likely tokens of the last distribution, most likely first (ties: lower id first), with their
  // log-probabilities: a k-element selection, not a sort of the vocabulary.
  std::vector<std::pair<int32_t, float>> top_logprobs(size_t k);

 private:
  void apply_logit_bias();
  // Before min_tokens: the end tokens at -inf, unless nothing else is possible (a constraint that allows only
  // an end token wins).
  void hold_back_end_tokens(size_t history_size);
  void apply_penalties(std::span<const int32_t> history);
  // Candidate i's probability in the prepared distribution (renormalized over what was kept).
  double probabilities_scale(int32_t i) const { return double(probs_[size_t(i)]) / kept_mass_; }
  float log_normalizer();  // log of the softmax denominator of logits_

  SamplingParams params_;
  EndTokens end_;
  Rng rng_;
  std::vector<float> logits_;
  std::vector<int32_t> candidates_;
  std::vector<float> probs_;        // [keep] of candidates_, summing to kept_mass_
  int32_t keep_ = 0;                // candidates that survived top-k/top-p/min-p
  double kept_mass_ = 1.0;
  int32_t greedy_id_ = -1;          // prepared greedily: the point mass; -1 when sampled
  bool impossible_ = false;         // every logit was NaN or -inf: draw() returns the first candidate
  std::vector<float> logprobs_;
  bool logprobs_valid_ = false;
  float log_normalizer_ = 0.0f;
  bool log_normalizer_valid_ = false;
  std::vector<int32_t> top_;
  std::unordered_map<int32_t, int32_t> counts_;
  std::vector<std::pair<int32_t, float>> held_;  // hold_back_end_tokens: the logits it set to -inf
};

}  // namespace tessera
