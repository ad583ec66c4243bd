// Running a CompiledGrammar as a pushdown automaton. A parse is a stack of automaton states: the top is where
// the innermost rule stands, the states below are where each caller resumes once its callee has matched.
// Several parses may be alive at once (an ambiguous grammar, or a byte that could start either of two
// rules), so the matcher's state is a set of stacks, kept expanded: every stack's top is a state that
// consumes bytes (calls are entered and finished rules returned from as soon as they can be).
//
// Bounds: a stack deeper than max_depth is dropped (nesting beyond it is never generated), and a set that
// would hold more than max_stacks parses is treated as dead, so that no grammar can make one byte cost more
// than a bounded amount of work.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"

namespace tessera::grammar {

struct StackSet {
  std::vector<int32_t> cells;  // every stack's states, bottom first, one stack after another
  std::vector<uint32_t> ends;  // [n_stacks] end offset of each stack in `cells`
  // A stack emptied: the root rule matched everything so far (or, for a set started with open_bottom, the
  // state below which nothing is known was left).
  bool accepting = false;

  size_t size() const { return ends.size(); }
  bool empty() const { return ends.empty(); }
  bool dead() const { return ends.empty() && !accepting; }
  std::span<const int32_t> stack(size_t i) const {
    const uint32_t begin = i == 0 ? 0 : ends[i - 1];
    return {cells.data() + begin, cells.data() + ends[i]};
  }
  int32_t top(size_t i) const { return cells[ends[i] - 1]; }
  void clear() {
    cells.clear();
    ends.clear();
    accepting = false;
  }
  // A byte string that identifies the set (the mask cache's key).
  void serialize(std::string& out) const;
};

struct PdaLimits {
  int32_t max_depth = 256;
  int32_t max_stacks = 1024;
  // Distinct stacks one expansion may visit (kept or not) before the set is treated as dead.
  size_t max_visits() const { return size_t(max_stacks) * 8; }
};

// What the last advance() cost, against PdaLimits: a walk from one state on its own can tell from these whether
// the same bytes under a deeper stack, or beside other stacks, would meet a limit it did not.
struct PdaStepStats {
  size_t visits = 0;      // distinct stacks visited (a step that needs no expansion: one)
  int32_t depth = 0;      // the deepest stack visited
  bool limited = false;   // a limit ended the step (the set came out dead)
};

// Holds scratch space: one per thread of use (the matcher and the mask builder each own one).
class PdaRunner {
 public:
  explicit PdaRunner(const CompiledGrammar& grammar, PdaLimits limits = {});

  // The expanded set for the start of the root rule.
  void start(StackSet& out);
  // `out` = {[state]} without expansion: the view of one stack top on its own, as the mask cache takes it.
  static void single(int32_t state, StackSet& out);
  // `out` = the expanded set after `byte` (dead when no parse takes it). `in` and `out` must differ.
  void advance(const StackSet& in, uint8_t byte, StackSet& out);

  const CompiledGrammar& grammar() const { return g_; }
  const PdaLimits& limits() const { return limits_; }
  const PdaStepStats& last_step() const { return last_; }

 private:
  // Expands work_ (stacks waiting in scratch_) into out_.
  void expand(StackSet& out);
  void push_work(std::span<const int32_t> prefix, std::initializer_list<int32_t> tail);
  bool seen_before(std::span<const int32_t> stack);

  const CompiledGrammar& g_;
  PdaLimits limits_;
  PdaStepStats last_;
  std::vector<int32_t> scratch_;                        // stacks waiting to be expanded
  std::vector<std::pair<uint32_t, uint32_t>> work_;     // (offset, length) into scratch_
  std::vector<int32_t> seen_cells_;                     // stacks already expanded in this step
  std::vector<std::pair<uint32_t, uint32_t>> seen_;     // (offset, length) into seen_cells_
  std::vector<uint32_t> seen_table_;                    // open addressing: index into seen_ + 1, 0 = empty
  std::vector<uint32_t> used_slots_;                    // slots of seen_table_ in use (cleared per step)
};

}  // namespace tessera::grammar
