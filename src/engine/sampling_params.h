// What a request asks of the sampler. Defaults are neutral (plain sampling at temperature 1); front-ends set
// their own defaults.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/sampling_defaults.h"

namespace tessera {

// Temperatures below this sample greedily. 1/T overflows a float for the smallest ones (1e-40 makes every
// logit +-inf or NaN), and already at 1e-4 a logit gap of 0.01 is e^-100: a point mass on the maximum.
inline constexpr float kGreedyBelowTemperature = 1e-4f;
// Longest stop string, in bytes. The stop matcher holds back and rescans up to this much text per token on
// the engine thread, so an unbounded one (a megabyte from a request body) would stall every sequence.
inline constexpr size_t kMaxStopBytes = 256;
// Logit biases and stop token ids per request: each sampled token looks at every bias and every stop id, on the
// engine thread. OpenAI bounds a bias to [-100, 100]: -100 bans a token in practice, 100 forces it.
inline constexpr size_t kMaxLogitBiases = 512;  // the server's limit on an object's members (openai_json.h)
inline constexpr size_t kMaxStopTokenIds = 256;
inline constexpr float kMaxLogitBias = 100.0f;

struct LogitBias {
  int32_t token = 0;
  float bias = 0.0f;
  bool operator==(const LogitBias&) const = default;
};

struct SamplingParams {
  float temperature = 1.0f;      // < kGreedyBelowTemperature (0 included): greedy (argmax)
  int32_t top_k = 0;             // 0: off
  float top_p = 1.0f;            // 1: off
  float min_p = 0.0f;            // 0: off; keep tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;  // CTRL-style: positive logits divided, negative multiplied
  int32_t repetition_window = 64;   // how many recent tokens the repetition penalty looks at (-1: all)
  float frequency_penalty = 0.0f;   // OpenAI: logit -= count * frequency_penalty
  float presence_penalty = 0.0f;    // OpenAI: logit -= (count > 0) * presence_penalty
  uint64_t seed = 0;
  bool has_seed = false;            // without a seed a random one is drawn at submit time
  int32_t max_tokens = 16;
  std::vector<std::string> stop;    // generation ends before any of these strings
  bool ignore_eos = false;
  // OpenAI's logit_bias: added to the token's logit before the penalties (and before the argmax when greedy).
  // Sorted by token, each token once.
  std::vector<LogitBias> logit_bias;
  // vLLM's: generation ends when one of these is sampled, as at an end-of-generation token (its text is not
  // part of the output), whatever ignore_eos says.
  std::vector<int32_t> stop_token_ids;
  // vLLM's: before this many tokens are generated, the end-of-generation tokens (unless ignore_eos) and
  // stop_token_ids are not sampled and stop strings do not end the output. A constrained output whose grammar
  // allows nothing else still ends (the constraint wins).
  int32_t min_tokens = 0;

  bool is_greedy() const { return temperature < kGreedyBelowTemperature; }
};

// `params` with the fields `defaults` sets replaced: the base a front-end starts each request from.
inline SamplingParams with_defaults(SamplingParams params, const SamplingDefaults& defaults) {
  if (defaults.temperature) params.temperature = *defaults.temperature;
  if (defaults.top_k) params.top_k = *defaults.top_k;
  if (defaults.top_p) params.top_p = *defaults.top_p;
  if (defaults.min_p) params.min_p = *defaults.min_p;
  if (defaults.repetition_penalty) params.repetition_penalty = *defaults.repetition_penalty;
  return params;
}

// Checks ranges; returns an empty string when valid, otherwise what is wrong (for a 400 or a CLI error).
std::string validate(const SamplingParams& params);
// validate()'s check of min_tokens against max_tokens alone, for callers that name the field.
std::string min_tokens_problem(const SamplingParams& params);

}  // namespace tessera
