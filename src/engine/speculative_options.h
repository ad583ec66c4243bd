// Speculative decoding's options: which proposer guesses the next tokens, how many per step, and whether the
// engine decides per step (from its measured step costs) or always speculates.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/model.h"

namespace tessera {

enum class SpecMethod {
  Off,
  Ngram,  // prompt lookup: the continuation of the longest recent n-gram match in the sequence itself
  Draft,  // a smaller (or quantized) model with the target's vocabulary proposes, with its own paged KV cache
};
const char* spec_method_name(SpecMethod method);  // "off", "ngram", "draft"

// The most draft tokens one step verifies. Past ~8 even a perfect proposer gains little (the step cost grows
// with every token while the expected accepted run is bounded by 1/(1 - acceptance)); 16 leaves room to measure.
inline constexpr int64_t kMaxSpecTokens = 16;

enum class SpecSwitch {
  CostModel,  // per step: speculate with the k (0..spec_tokens) the measured step costs and acceptance favour
  Always,     // every eligible sequence proposes spec_tokens tokens every step (tests, measurements)
};

struct SpeculativeOptions {
  SpecMethod method = SpecMethod::Off;
  int64_t spec_tokens = 4;                   // k: draft tokens proposed per sequence and step, 1..kMaxSpecTokens
  std::shared_ptr<const Model> draft_model;  // SpecMethod::Draft: its vocabulary must equal the target's
  SpecSwitch switch_policy = SpecSwitch::CostModel;
  bool enabled() const { return method != SpecMethod::Off; }
};

// Empty when `options` can run with `target`, else what is wrong (k out of range, no draft model, a draft whose
// vocabulary differs from the target's: the first differing token named).
std::string speculative_problem(const SpeculativeOptions& options, const Model& target);

}  // namespace tessera
