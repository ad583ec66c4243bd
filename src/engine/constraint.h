// Constrained decoding as the engine sees it: a request may carry a grammar::Constraint (a compiled grammar,
// shared by every request with the same schema); each of its sequences gets a SequenceConstraint that masks the
// logits row before sampling and follows the sampled tokens. Sequences with and without constraints share a
// batch: the mask touches only the constrained sequence's own copy of its row.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "grammar/vocabulary.h"

namespace tessera {

class Tokenizer;

// The tokenizer's vocabulary as the grammar engine reads it: each id's raw bytes (token_piece), for the `n_vocab`
// ids of the model's logits rows (a model may have more rows than the tokenizer has tokens: those never pass a
// mask), and the end-of-generation ids. Costs a sort and a trie of the vocabulary (about 45 ms for 151,936 tokens):
// build once per model.
std::shared_ptr<const grammar::Vocabulary> make_grammar_vocabulary(const Tokenizer& tokenizer, int32_t n_vocab);

class SequenceConstraint {
 public:
  // `ignore_eos`: the sequence goes on past end-of-generation tokens, so they are never allowed by the mask
  // (the grammar's end is then reached only when nothing can follow: finished()). Throws tessera::Error when the
  // constraint is inconsistent (a trigger its grammar does not begin with).
  SequenceConstraint(std::shared_ptr<const grammar::Constraint> constraint,
                     std::shared_ptr<const grammar::Vocabulary> vocab, bool ignore_eos);

  // `logits` with every token the constraint does not allow next set to -inf, in a buffer owned here (valid until
  // the next call). Empty when no token is allowed: the grammar cannot go on (a nesting limit) and is not complete.
  std::span<const float> apply(std::span<const float> logits);
  // Moves past `token`; false (nothing changed) when the constraint does not allow it.
  bool accept(int32_t token) { return matcher_.accept(token); }
  // The constrained output is complete and nothing may follow: the sequence ends here.
  bool finished() const { return matcher_.finished(); }

 private:
  grammar::Matcher matcher_;
  std::shared_ptr<const grammar::Vocabulary> vocab_;
  bool ignore_eos_;
  grammar::TokenMask mask_;
  std::vector<float> masked_;  // [n_vocab]
};

}  // namespace tessera
