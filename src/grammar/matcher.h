// One sequence's progress through its constraint: which tokens may come next (fill_mask) and the step over the
// token that was sampled (accept). This is the whole interface the engine sees: a mask applied to the
// sequence's logits row before sampling, then accept() with the sampled token.
//
// End of generation tokens are in the mask exactly when the grammar may end there; once nothing can follow
// (finished()), the sequence must end. Masks come from the grammar's cache; a miss costs a walk over the
// vocabulary trie, bounded by the trie's size.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/mask_builder.h"
#include "grammar/pda.h"
#include "grammar/token_mask.h"
#include "grammar/vocabulary.h"

namespace tessera::grammar {

class Matcher {
 public:
  Matcher(std::shared_ptr<const Constraint> constraint, std::shared_ptr<const Vocabulary> vocab);

  // `mask` (resized to the vocabulary) = the tokens allowed next. May be empty when no token can continue
  // (see dead()).
  void fill_mask(TokenMask& mask);
  // Moves past `token`. Returns false, changing nothing, when the constraint does not allow it.
  bool accept(int32_t token);

  bool constrained() const { return in_grammar_; }  // false while free text waits for the trigger
  // The grammar is complete and no byte may follow: the sequence must end now.
  bool finished() const { return in_grammar_ && state_.empty() && state_.accepting; }
  // No token can continue and the grammar is not complete (a nesting limit reached).
  bool dead() const { return in_grammar_ && state_.dead(); }

 private:
  void fill_grammar_mask(TokenMask& mask);
  void fill_trigger_mask(TokenMask& mask);
  // Where the trigger's matcher stands after `bytes` from `k` (-1: the trigger can no longer occur); sets
  // *completed_at to the index just past the trigger when the bytes complete it.
  int32_t scan_trigger(int32_t k, std::string_view bytes, size_t* completed_at) const;

  std::shared_ptr<const Constraint> constraint_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::shared_ptr<MaskCache> cache_;
  MaskBuilder builder_;
  StackSet state_;
  StackSet scratch_;
  std::string key_;
  std::vector<uint32_t> candidates_;
  bool in_grammar_ = true;
  int32_t trigger_k_ = 0;             // bytes of the trigger matched so far; -1: it can no longer occur
  std::vector<int32_t> trigger_fail_;  // KMP failure links of the trigger
  StackSet after_trigger_;            // the grammar's state once the trigger has been read
};

}  // namespace tessera::grammar
