// Sampling chain: logit bias → min_tokens → penalties → temperature → top-k → softmax → top-p → min-p → draw.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "fmt/format.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

std::string min_tokens_problem(const SamplingParams& p) {
  if (p.min_tokens <= p.max_tokens) return {};
  return fmt::format("min_tokens ({}) must be at most max_tokens ({})", p.min_tokens, p.max_tokens);
}

std::string validate(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f) return "temperature must be >= 0";
  if (p.top_k < 0) return "top_k must be >= 0";
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return "top_p must be in (0, 1]";
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return "min_p must be in [0, 1]";
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) return "repetition_penalty must be > 0";
  if (!std::isfinite(p.frequency_penalty) || std::fabs(p.frequency_penalty) > 2.0f) {
    return "frequency_penalty must be in [-2, 2]";
  }
  if (!std::isfinite(p.presence_penalty) || std::fabs(p.presence_penalty) > 2.0f) {
    return "presence_penalty must be in [-2, 2]";
  }
  if (p.max_tokens < 0) return "max_tokens must be >= 0";
  if (p.min_tokens < 0) return "min_tokens must be >= 0";
  if (std::string problem = min_tokens_problem(p); !problem.empty()) return problem;
  if (p.logit_bias.size() > kMaxLogitBiases)
    return fmt::format("logit_bias may hold at most {} tokens", kMaxLogitBiases);
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    const LogitBias& b = p.logit_bias[i];
    if (b.token < 0) return "logit_bias token ids must be >= 0";
    if (i > 0 && b.token <= p.logit_bias[i - 1].token) return "logit_bias must be sorted by token, each token once";
    if (!(std::fabs(b.bias) <= kMaxLogitBias)) return "logit_bias values must be between -100 and 100";
  }
  if (p.stop_token_ids.size() > kMaxStopTokenIds)
    return fmt::format("stop_token_ids may hold at most {} tokens", kMaxStopTokenIds);
  for (int32_t id : p.stop_token_ids)
    if (id < 0) return "stop_token_ids must be >= 0";
  for (const auto& s : p.stop) {
    if (s.empty()) return "stop strings must not be empty";
    if (s.size() > kMaxStopBytes) return fmt::format("stop strings may be at most {} bytes long", kMaxStopBytes);
  }
  return {};
}

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kMaxFloat = std::numeric_limits<float>::max();

// NaN ranks below everything: never drawn, never a top logprob.
inline float rank(float x) { return x != x ? kNegInf : x; }

// The first maximum, NaN never winning (an all-NaN row gives 0).
int32_t argmax(std::span<const float> x) {
  int32_t best = 0;
  float best_value = kNegInf;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] > best_value) {
      best_value = x[i];
      best = int32_t(i);
    }
  }
  return best;
}

// Scales by 1/T; NaN becomes -inf (never drawn) and +inf (given, or a huge logit over a small temperature) the
// largest float, so that the candidate sort gets a strict weak order (NaN compares false with everything) and
// exp(l - max) stays finite. One branch-free pass over the vocabulary per sampled token, as the plain scaling
// was: sampler.cpp is compiled with -ftree-vectorize for it (CMakeLists.txt).
void scale_and_tame(std::vector<float>& logits, float inv_t) {
  float* x = logits.data();
  const size_t n = logits.size();
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i] * inv_t;
    x[i] = v == v ? (v < kMaxFloat ? v : kMaxFloat) : kNegInf;
  }
}
}  // namespace

void top_k_indices(std::span<const float> values, size_t k, std::vector<int32_t>& out) {
  out.clear();
  k = std::min(k, values.size());
  if (k == 0) return;
  auto above = [&](int32_t a, int32_t b) {
    const float x = rank(values[size_t(a)]), y = rank(values[size_t(b)]);
    return x > y || (x == y && a < b);
  };
  // A heap whose front is the lowest-ranked index kept. Later indices lose ties, so a value must beat the front's
  // strictly to get in: one comparison for almost every value (NaN never passes it).
  for (int32_t i = 0; i < int32_t(k); ++i) out.push_back(i);
  std::make_heap(out.begin(), out.end(), above);
  float floor = rank(values[size_t(out.front())]);
  for (int32_t i = int32_t(k); i < int32_t(values.size()); ++i) {
    if (!(values[size_t(i)] > floor)) continue;
    std::pop_heap(out.begin(), out.end(), above);
    out.back() = i;
    std::push_heap(out.begin(), out.end(), above);
    floor = rank(values[size_t(out.front())]);
  }
  std::sort(out.begin(), out.end(), above);
}

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

EndTokens end_tokens_for(const SamplingParams& params, std::span<const int32_t> eog_ids, int64_t n_prompt) {
  EndTokens end;
  end.n_prompt = n_prompt;
  if (params.min_tokens <= 0) return end;
  if (!params.ignore_eos) end.ids.assign(eog_ids.begin(), eog_ids.end());
  end.ids.insert(end.ids.end(), params.stop_token_ids.begin(), params.stop_token_ids.end());
  std::sort(end.ids.begin(), end.ids.end());
  end.ids.erase(std::unique(end.ids.begin(), end.ids.end()), end.ids.end());
  return end;
}

EndTokens end_tokens_for(const SamplingParams& params, const Tokenizer& tokenizer, int64_t n_prompt) {
  if (params.min_tokens <= 0) return {n_prompt, {}};
  return end_tokens_for(params, tokenizer.eog_ids(), n_prompt);
}

Sampler::Sampler(const SamplingParams& params, EndTokens end)
    : params_(params), end_(std::move(end)), rng_(params.seed) {}

void Sampler::apply_logit_bias() {
  const size_t n = logits_.size();
  for (const LogitBias& b : params_.logit_bias)
    if (size_t(b.token) < n) logits_[size_t(b.token)] += b.bias;
}

void Sampler::hold_back_end_tokens(size_t history_size) {
  if (end_.ids.empty() || int64_t(history_size) - end_.n_prompt >= params_.min_tokens) return;
  const size_t n = logits_.size();
  held_.clear();
  for (int32_t id : end_.ids) {
    if (size_t(id) >= n) continue;
    held_.emplace_back(id, logits_[size_t(id)]);
    logits_[size_t(id)] = kNegInf;
  }
  if (std::none_of(logits_.begin(), logits_.end(), [](float x) { return x > kNegInf; }))
    for (const auto& [id, value] : held_) logits_[size_t(id)] = value;
}

void Sampler::apply_penalties(std::span<const int32_t> history) {
  const bool repetition = params_.repetition_penalty != 1.0f;
  const bool openai = params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f;
  if (!repetition && !openai) return;
  size_t window = history.size();
  if (params_.repetition_window >= 0) window = std::min(window, size_t(params_.repetition_window));
  counts_.clear();
  for (size_t i = history.size() - window; i < history.size(); ++i) ++counts_[history[i]];
  const auto n_vocab = int32_t(logits_.size());
  for (const auto& [id, count] : counts_) {
    if (id < 0 || id >= n_vocab) continue;
    float& l = logits_[size_t(id)];
    if (repetition) l = l > 0.0f ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    l -= float(count) * params_.frequency_penalty + params_.presence_penalty;
  }
}

SampledToken Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  prepare(logits, history);
  return draw();
}

void Sampler::prepare(std::span<const float> logits, std::span<const int32_t> history) {
  logits_.assign(logits.begin(), logits.end());
  logprobs_valid_ = log_normalizer_valid_ = false;
  impossible_ = false;
  apply_logit_bias();
  hold_back_end_tokens(history.size());
  apply_penalties(history);
  const auto n = int32_t(logits_.size());

  if (params_.is_greedy()) {
    // First maximum wins ties, so the result never depends on anything but the logits.
    greedy_id_ = argmax(logits_);
    return;
  }
  greedy_id_ = -1;

  scale_and_tame(logits_, 1.0f / params_.temperature);

  // Candidates sorted by logit (descending, ties by id) so truncation is deterministic.
  candidates_.resize(size_t(n));
  std::iota(candidates_.begin(), candidates_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits_[size_t(a)] > logits_[size_t(b)] || (logits_[size_t(a)] == logits_[size_t(b)] && a < b);
  };
  int32_t keep = n;
  if (params_.top_k > 0 && params_.top_k < n) {
    keep = params_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(size_t(keep));

  const float max_logit = logits_[size_t(candidates_[0])];
  if (max_logit == kNegInf) {  // nothing is possible: every logit was NaN or -inf
    impossible_ = true;
    keep_ = 1;
    kept_mass_ = 1.0;
    probs_.assign(1, 1.0f);
    return;
  }
  probs_.resize(size_t(keep));
  double sum = 0.0;
  for (int32_t i = 0; i < keep; ++i) {
    probs_[size_t(i)] = std::exp(logits_[size_t(candidates_[size_t(i)])] - max_logit);
    sum += probs_[size_t(i)];
  }
  for (float& p : probs_) p = float(p / sum);

  if (params_.top_p < 1.0f) {
    double cumulative = 0.0;
    int32_t cut = keep;
    for (int32_t i = 0; i < keep; ++i) {
      cumulative += probs_[size_t(i)];
      if (cumulative >= params_.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
  }
  if (params_.min_p > 0.0f) {
    const float threshold = params_.min_p * probs_[0];
    int32_t cut = 1;
    while (cut < keep && probs_[size_t(cut)] >= threshold) ++cut;
    keep = cut;
  }

  double kept_mass = 0.0;
  for (int32_t i = 0; i < keep; ++i) kept_mass += probs_[size_t(i)];
  keep_ = keep;
  kept_mass_ = kept_mass;
}

SampledToken Sampler::draw() {
  if (greedy_id_ >= 0) return {greedy_id_, 0.0f};
  if (impossible_) return {candidates_[0], kNegInf};
  const double r = rng_.uniform() * kept_mass_;
  double acc = 0.0;
  int32_t chosen = keep_ - 1;
  for (int32_t i = 0; i < keep_; ++i) {
    acc += probs_[size_t(i)];
    if (r < acc) {
      chosen = i;
      break;
    }
  }
  return {candidates_[size_t(chosen)], float(std::log(probs_[size_t(chosen)] / kept_mass_))};
}

double Sampler::probability(int32_t id) const {
  if (greedy_id_ >= 0) return id == greedy_id_ ? 1.0 : 0.0;
  if (impossible_) return id == candidates_[0] ? 1.0 : 0.0;
  for (int32_t i = 0; i < keep_; ++i)
    if (candidates_[size_t(i)] == id) return double(probs_[size_t(i)]) / kept_mass_;
  return 0.0;
}

void Sampler::probabilities(std::vector<float>& dense) const {
  dense.assign(logits_.size(), 0.0f);
  if (greedy_id_ >= 0) {
    dense[size_t(greedy_id_)] = 1.0f;
    return;
  }
  for (int32_t i = 0; i < keep_; ++i) dense[size_t(candidates_[size_t(i)])] = float(probabilities_scale(i));
}

SampledToken Sampler::draw_residual(std::span<const float> q, int32_t point) {
  if (greedy_id_ >= 0) return {greedy_id_, 0.0f};  // a point mass: the residual is the mass itself
  if (impossible_) return {candidates_[0], kNegInf};
  auto q_of = [&](int32_t id) -> double { return q.empty() ? (id == point ? 1.0 : 0.0) : double(q[size_t(id)]); };
  double total = 0.0;
  for (int32_t i = 0; i < keep_; ++i) {
    total += std::max(0.0, probabilities_scale(i) - q_of(candidates_[size_t(i)]));
  }
  if (!(total > 0.0)) return draw();
  const double r = rng_.uniform() * total;
  double acc = 0.0;
  int32_t chosen = -1;
  for (int32_t i = 0; i < keep_; ++i) {
    const double m = std::max(0.0, probabilities_scale(i) - q_of(candidates_[size_t(i)]));
    if (m <= 0.0) continue;
    chosen = i;
    acc += m;
    if (r < acc) break;
  }
  return {candidates_[size_t(chosen)], float(std::log(probs_[size_t(chosen)] / kept_mass_))};
}

float log_sum_exp(std::span<const float> row) {
  const float max_logit = row.empty() ? kNegInf : row[size_t(argmax(row))];
  if (!std::isfinite(max_logit)) return 0.0f;
  double sum = 0.0;
  for (float l : row) sum += l == l ? std::exp(double(l - max_logit)) : 0.0;
  return float(std::log(sum)) + max_logit;
}

PositionLogprobs position_logprobs(std::span<const float> row, int32_t next, size_t k, std::vector<int32_t>& scratch) {
  const float log_sum = log_sum_exp(row);
  PositionLogprobs out;
  out.token = next;
  out.logprob = row[size_t(next)] - log_sum;
  // vLLM's rank: the tokens at least as likely, itself included (ties share the worse rank); a NaN logit ranks
  // after every number, as top_k_indices orders it.
  const float x = row[size_t(next)];
  out.rank = 0;
  if (x == x) {
    for (float y : row) out.rank += y >= x ? 1 : 0;
  } else {
    for (float y : row) out.rank += y == y ? 1 : 0;
    ++out.rank;
  }
  top_k_indices(row, k, scratch);
  for (int32_t id : scratch) out.top.emplace_back(id, row[size_t(id)] - log_sum);
  return out;
}

float Sampler::log_normalizer() {
  if (!log_normalizer_valid_) {
    // All -inf or NaN: nothing is likely (logprobs -inf). Sampled rows are tamed (no +inf, no NaN); a greedy row
    // from the engine is finite.
    log_normalizer_ = log_sum_exp(logits_);
    log_normalizer_valid_ = true;
  }
  return log_normalizer_;
}

const std::vector<float>& Sampler::last_logprobs() {
  if (!logprobs_valid_) {
    const float log_sum = log_normalizer();
    logprobs_.resize(logits_.size());
    for (size_t i = 0; i < logits_.size(); ++i) logprobs_[i] = logits_[i] - log_sum;
    logprobs_valid_ = true;
  }
  return logprobs_;
}

float Sampler::logprob(int32_t id) { return logits_[size_t(id)] - log_normalizer(); }

std::vector<std::pair<int32_t, float>> Sampler::top_logprobs(size_t k) {
  top_k_indices(logits_, k, top_);
  std::vector<std::pair<int32_t, float>> out;
  out.reserve(top_.size());
  const float log_sum = log_normalizer();
  for (int32_t id : top_) out.emplace_back(id, logits_[size_t(id)] - log_sum);
  return out;
}

}  // namespace tessera
