// Accept with min(1, p/q), else the residual; the bonus token after a fully accepted run.
#include "engine/verification.h"

namespace tessera {

Verdict judge_draft(Sampler& sampler, int32_t x, std::span<const float> q) {
  if (sampler.greedy()) {
    const int32_t best = sampler.draw().id;
    return {best, best == x};
  }
  const double p = sampler.probability(x);
  const double qx = q.empty() ? 1.0 : double(q[size_t(x)]);
  // u < p/q, written without the division: q(x) > 0 for a token drawn from q (else it is rejected).
  if (qx > 0.0 && sampler.uniform() * qx < p) return {x, true};
  return {sampler.draw_residual(q, x).id, false};
}

VerifyOutcome verify_draft(Sampler& sampler, const std::vector<int32_t>& history, std::span<const float> rows,
                           size_t n_vocab, std::span<const int32_t> draft, std::span<const std::vector<float>> q,
                           const std::function<bool(int32_t, std::span<const float>)>& emit,
                           const RowFilter& allowed) {
  VerifyOutcome out;
  for (size_t i = 0; i <= draft.size(); ++i) {
    const auto row = rows.subspan(i * n_vocab, n_vocab);
    const auto sampled_row = allowed ? allowed(row) : row;
    if (sampled_row.empty()) {
      out.alive = false;
      return out;
    }
    sampler.prepare(sampled_row, history);
    if (i == draft.size()) {  // every guess kept: the target's own next token comes free
      out.alive = emit(sampler.draw().id, row);
      return out;
    }
    const Verdict v = judge_draft(sampler, draft[i], i < q.size() ? std::span<const float>(q[i]) : std::span<const float>());
    if (v.accepted) ++out.n_accepted;
    out.alive = emit(v.token, row);
    if (!out.alive || !v.accepted) return out;
  }
  return out;
}

}  // namespace tessera
