// GrammarIR -> CompiledGrammar: each rule becomes a Thompson NFA over bytes (small, non-recursive rules are
// copied into their callers instead), then a DFA by subset construction; the result is checked (left
// recursion, a root that matches nothing) and pruned of branches that can never complete. Every step is
// bounded by CompileLimits, so hostile input ends in a GrammarError, not in exhausted memory.
#pragma once

#include <cstddef>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_ir.h"

namespace tessera::grammar {

struct CompileLimits {
  size_t max_nfa_states = 400000;
  size_t max_dfa_states = 40000;
  // Rules up to this many NFA states (estimated) are copied into each caller; bigger ones are called, unless
  // used only once.
  size_t inline_states = 256;
  // Steps of determinization (NFA states visited in closures, edges followed, state sets hashed): overlapping
  // unbounded alternatives make each DFA state hold thousands of NFA states, so the state count alone does not
  // bound the time (3000 alternatives of the form [^x]* "y": 4 s). 4 to 30 ns a step: at most ~0.3 s.
  size_t max_work = 20'000'000;
};

// Throws GrammarError: undefined rule, left recursion, a root that matches no string, a limit exceeded.
CompiledGrammar compile(const GrammarIR& ir, const CompileLimits& limits = {});

}  // namespace tessera::grammar
