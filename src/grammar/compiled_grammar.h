// A grammar compiled for matching: one deterministic automaton over bytes per rule, whose states may also call
// other rules (a recursive transition network, run as a pushdown automaton by matcher_state.h). Byte
// transitions are a dense table over byte classes (bytes no rule tells apart share a class), so a step is two
// loads. Immutable once built; shared by every request with the same grammar.
//
// Guarantees established by compile() (compile.h): every state can still reach the end of its rule (dead
// branches are pruned, so a prefix the automaton accepts can always be completed), and no rule can call itself
// without consuming a byte first (left recursion is rejected), so expanding calls always terminates.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessera::grammar {

struct Call {
  int32_t rule = -1;  // the rule entered
  int32_t ret = -1;   // the state of the caller's automaton once that rule has matched
};

class CompiledGrammar {
 public:
  static constexpr uint8_t kFinal = 1;     // the state's rule may end here
  static constexpr uint8_t kHasBytes = 2;  // some byte leads on
  static constexpr uint8_t kHasCalls = 4;  // some rule may be entered here

  int32_t n_states() const { return int32_t(flags_.size()); }
  int32_t n_rules() const { return int32_t(rule_starts_.size()); }
  int32_t n_byte_classes() const { return n_classes_; }
  int32_t root_rule() const { return root_; }
  int32_t rule_start(int32_t rule) const { return rule_starts_[size_t(rule)]; }
  const std::string& rule_name(int32_t rule) const { return rule_names_[size_t(rule)]; }

  // The state after `byte`, or -1.
  int32_t next(int32_t state, uint8_t byte) const {
    return next_[size_t(state) * size_t(n_classes_) + byte_class_[byte]];
  }
  uint8_t flags(int32_t state) const { return flags_[size_t(state)]; }
  bool is_final(int32_t state) const { return flags_[size_t(state)] & kFinal; }
  std::span<const Call> calls(int32_t state) const {
    return {calls_.data() + call_begin_[size_t(state)], calls_.data() + call_begin_[size_t(state) + 1]};
  }
  // Approximate heap bytes (for cache accounting).
  uint64_t bytes() const;

 private:
  friend class Compiler;
  int32_t n_classes_ = 0;
  int32_t root_ = -1;
  std::array<uint8_t, 256> byte_class_{};
  std::vector<int32_t> next_;         // [n_states * n_classes]
  std::vector<uint8_t> flags_;        // [n_states]
  std::vector<uint32_t> call_begin_;  // [n_states + 1] into calls_
  std::vector<Call> calls_;
  std::vector<int32_t> rule_starts_;  // [n_rules]; -1 for a rule that was inlined everywhere
  std::vector<std::string> rule_names_;
};

}  // namespace tessera::grammar
