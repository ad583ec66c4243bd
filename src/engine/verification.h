// The verification rule of speculative decoding (Leviathan et al. 2023; Chen et al. 2023): a draft token x
// drawn from q is kept with probability min(1, p(x) / q(x)), where p is the target's distribution after every
// sampling transform (penalties, temperature, top-k, top-p, min-p, exactly as without speculation); the first
// rejected one is replaced by a draw from the residual max(0, p - q), renormalized; when all are kept the
// target's next distribution gives one more token. Every output token is then distributed exactly as plain
// sampling from p would give it. Greedy is the special case p = a point mass on the argmax: a draft token is
// kept when it is the argmax, else the argmax replaces it — the tokens of plain greedy decoding.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/sampler.h"

namespace tessera {

struct Verdict {
  int32_t token = -1;     // what the sequence gets at this position
  bool accepted = false;  // the draft token itself
};

// Judges draft token `x` against the distribution `sampler` was prepared with. `q`: the draft's distribution
// over the vocabulary, or empty for a point mass on x (prompt lookup, greedy drafting).
Verdict judge_draft(Sampler& sampler, int32_t x, std::span<const float> q);

struct VerifyOutcome {
  int64_t n_accepted = 0;  // draft tokens kept
  bool alive = true;       // false: `emit` ended the sequence (a stop, the length, an error)
};

// What a sequence may sample from at a position: `row` with what its constraint forbids next set to -inf (a
// grammar's mask, following the tokens emitted so far), or empty when nothing is allowed.
using RowFilter = std::function<std::span<const float>(std::span<const float> row)>;

// Runs the rule over one verification chunk: rows [draft.size() + 1, n_vocab] of target logits, row i after
// position i of the chunk. For each position the sampler is prepared from the row (through `allowed` when
// given: the rule then keeps the constrained distribution, and a guess the constraint forbids is always
// rejected) and `history` (the sequence, which `emit` extends), and each output token goes to emit(token, row)
// with the unfiltered row, which returns false when the sequence ended there. An empty filtered row ends the
// chunk there (alive = false, nothing emitted). `q[i]` is draft token i's distribution (q empty: point masses).
VerifyOutcome verify_draft(Sampler& sampler, const std::vector<int32_t>& history, std::span<const float> rows,
                           size_t n_vocab, std::span<const int32_t> draft, std::span<const std::vector<float>> q,
                           const std::function<bool(int32_t token, std::span<const float> row)>& emit,
                           const RowFilter& allowed = {});

}  // namespace tessera
