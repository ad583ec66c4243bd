// The walks over the vocabulary trie that decide which tokens a grammar state allows. Two kinds:
//
// - position(): one automaton state alone on a stack, nothing known below it. A token is *accepted* when some
//   parse survives it and no parse leaves that state's rule on the way (then it is valid whatever the stack holds
//   below, as long as the PdaLimits are not reached: see PositionMasks), *uncertain* when a parse leaves the rule
//   at or before the token's last byte (the callers decide), rejected otherwise. This classification depends on
//   the state only, so it is computed once per state and cached: xgrammar's "context-independent tokens".
// - check(): the uncertain tokens, decided against the whole stack set.
//
// Rejection of a prefix rejects every token under it in one jump (the trie is in preorder), and a token that
// shares a prefix with the previous one resumes from that prefix's state, so a walk costs about one automaton
// step per trie node actually reached.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/pda.h"
#include "grammar/token_mask.h"
#include "grammar/token_set.h"
#include "grammar/vocabulary.h"

namespace tessera::grammar {

struct PositionMasks {
  TokenSet accepted;
  std::vector<uint32_t> uncertain;  // positions in the vocabulary's sorted order, increasing
  // The most the walk's steps cost against the PdaLimits (the state alone is one stack of depth 1). `accepted`
  // holds for a stack of depth D while D - 1 + peak.depth <= max_depth (deeper, the runner would drop stacks the
  // walk kept), and for a set of stacks while the sums of their peak.visits and of their peak_stacks stay below
  // the limits (each stack's part of a step costs what it cost alone, and no token of `accepted` makes a parse
  // return below its stack); a walk that met a limit itself (peak.limited) holds for no other stack.
  PdaStepStats peak;
  size_t peak_stacks = 1;
  uint64_t bytes() const { return sizeof(*this) + accepted.bytes() + uncertain.size() * sizeof(uint32_t); }
};

class MaskBuilder {
 public:
  MaskBuilder(const CompiledGrammar& grammar, const Vocabulary& vocab, PdaLimits limits = {});

  PositionMasks position(int32_t state);
  // Sets in `mask` the tokens among `candidates` (sorted positions, increasing) that `set` accepts.
  void check(const StackSet& set, std::span<const uint32_t> candidates, TokenMask& mask);
  // Sets in `mask` every token `set` accepts, by a walk of the whole trie (no caches involved).
  void walk_all(const StackSet& set, TokenMask& mask);
  // `out` = `set` after `bytes`; returns false (out dead) when some byte is not accepted.
  bool advance_bytes(const StackSet& set, std::string_view bytes, StackSet& out);

  PdaRunner& runner() { return runner_; }

 private:
  // open_bottom: `start` is one state seen alone (position()); an emptied stack means "left the rule".
  // Fills the peaks of `out` (PositionMasks) when given.
  void walk_trie(const StackSet& start, bool open_bottom, TokenMask& accepted, std::vector<uint32_t>* uncertain,
                 PositionMasks* peaks = nullptr);

  PdaRunner runner_;
  const Vocabulary& vocab_;
  std::vector<StackSet> history_;  // [max token bytes + 1]: the set after each byte of the current prefix
  std::vector<uint8_t> left_before_;  // [same]: some parse left the rule before this depth (open_bottom)
  // walk_trie: [same] the top of a one-stack set whose top only consumes bytes, else -1; and the depth whose
  // history_ entry holds that set's cells (the entries in between are not stored: see walk_trie).
  std::vector<int32_t> pure_;
  std::vector<uint32_t> anchor_;
};

}  // namespace tessera::grammar
