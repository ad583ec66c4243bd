// Trie walks with resumable per-depth parse states.
#include "grammar/mask_builder.h"

#include <algorithm>
#include <limits>

namespace tessera::grammar {

MaskBuilder::MaskBuilder(const CompiledGrammar& grammar, const Vocabulary& vocab, PdaLimits limits)
    : runner_(grammar, limits), vocab_(vocab) {
  history_.resize(vocab.max_token_bytes() + 1);
  left_before_.resize(vocab.max_token_bytes() + 1);
  pure_.resize(vocab.max_token_bytes() + 1);
  anchor_.resize(vocab.max_token_bytes() + 1);
}

PositionMasks MaskBuilder::position(int32_t state) {
  StackSet start;
  PdaRunner::single(state, start);
  TokenMask accepted(vocab_.n_vocab());
  PositionMasks out;
  walk_trie(start, true, accepted, &out.uncertain, &out);
  out.accepted = TokenSet(accepted);
  return out;
}

void MaskBuilder::walk_all(const StackSet& set, TokenMask& mask) { walk_trie(set, false, mask, nullptr); }

void MaskBuilder::walk_trie(const StackSet& start, bool open_bottom, TokenMask& accepted,
                            std::vector<uint32_t>* uncertain, PositionMasks* peaks) {
  const std::span<const TrieNode> nodes = vocab_.nodes();
  const std::span<const int32_t> ids = vocab_.sorted_ids();
  const CompiledGrammar& g = runner_.grammar();
  history_[0] = start;
  left_before_[0] = 0;
  // A set of one stack whose top only consumes bytes is "pure": the next byte is one table lookup, and the set
  // after it is that stack with its top replaced (or nothing), so it is kept as pure_[d] (the top) and anchor_[d]
  // (the depth whose stored set has the cells below), and stored only when a byte leads somewhere else. Inside
  // strings and literals nearly every trie node is such a step.
  auto pure_top = [&](const StackSet& set) {
    return set.size() == 1 && !set.accepting && g.flags(set.top(0)) == CompiledGrammar::kHasBytes ? set.top(0) : -1;
  };
  // What the steps cost (PositionMasks): a pure step is one visit at its set's depth, no more than the runner's
  // step that made that set, so only the runner's steps are measured.
  PdaStepStats peak{1, start.empty() ? 0 : int32_t(start.stack(0).size()), false};
  size_t peak_stacks = start.size();
  pure_[0] = pure_top(start);
  anchor_[0] = 0;
  for (uint32_t i = 0; i < nodes.size();) {
    const TrieNode& n = nodes[i];
    const size_t d = n.depth;
    bool alive, accepting;
    if (const int32_t top = pure_[d - 1]; top >= 0 && g.next(top, n.byte) >= 0 &&
                                          g.flags(g.next(top, n.byte)) == CompiledGrammar::kHasBytes) {
      pure_[d] = g.next(top, n.byte);
      anchor_[d] = anchor_[d - 1];
      left_before_[d] = left_before_[d - 1];  // a pure set never accepts
      alive = true;
      accepting = false;
    } else {
      if (pure_[d - 1] >= 0 && anchor_[d - 1] != d - 1) {
        // Store the pure set at d - 1: its anchor's cells, top replaced.
        history_[d - 1] = history_[anchor_[d - 1]];
        history_[d - 1].cells.back() = pure_[d - 1];
        anchor_[d - 1] = uint32_t(d - 1);
      }
      const StackSet& prev = history_[d - 1];
      StackSet& cur = history_[d];
      runner_.advance(prev, n.byte, cur);
      const PdaStepStats& step = runner_.last_step();
      peak.visits = std::max(peak.visits, step.visits);
      peak.depth = std::max(peak.depth, step.depth);
      peak.limited = peak.limited || step.limited;
      peak_stacks = std::max(peak_stacks, cur.size());
      left_before_[d] = left_before_[d - 1] | uint8_t(open_bottom && d > 1 && prev.accepting);
      pure_[d] = pure_top(cur);
      anchor_[d] = uint32_t(d);
      alive = !cur.empty();
      accepting = cur.accepting;
    }
    // Ending here: accepted when a parse goes on, or the rule (root: the grammar) ends exactly here. Seen alone
    // (open_bottom), a token on which some parse leaves the rule is left to the callers even when another parse
    // goes on: what the parse below makes of the return is only bounded by the PdaLimits of the whole set (a
    // return with no room to go on at max_depth, or too ambiguous beside the other stacks).
    const bool left = open_bottom && (accepting || left_before_[d]);
    for (uint32_t k = n.token_begin; k < n.token_here_end; ++k) {
      if (left) {
        uncertain->push_back(k);
      } else if (alive || accepting) {
        accepted.set(ids[k]);
      }
    }
    if (!alive) {
      // Longer tokens: each left the rule before its end if any parse left it up to here.
      if (open_bottom && (left_before_[d] || accepting))
        for (uint32_t k = n.token_here_end; k < n.token_subtree_end; ++k) uncertain->push_back(k);
      i = n.subtree_end;
      continue;
    }
    ++i;
  }
  if (peaks) {
    peaks->peak = peak;
    peaks->peak_stacks = peak_stacks;
  }
}

void MaskBuilder::check(const StackSet& set, std::span<const uint32_t> candidates, TokenMask& mask) {
  if (candidates.empty()) return;
  const std::span<const int32_t> ids = vocab_.sorted_ids();
  constexpr size_t kAlive = std::numeric_limits<size_t>::max();
  history_[0] = set;
  size_t valid = 0;         // history_[0..valid] hold the states of the previous token's first `valid` bytes
  size_t dead_at = kAlive;  // the previous token died at this depth (no parse left)
  std::string_view prev;
  for (uint32_t k : candidates) {
    const std::string_view cur = vocab_.sorted_bytes(k);
    size_t lcp = 0;
    const size_t limit = std::min({prev.size(), cur.size(), valid});
    while (lcp < limit && prev[lcp] == cur[lcp]) ++lcp;
    valid = lcp;
    prev = cur;
    if (dead_at <= valid) {
      // The shared prefix already has no parse; only a token that is exactly that prefix can be accepted.
      if (cur.size() == dead_at && history_[dead_at].accepting) mask.set(ids[k]);
      continue;
    }
    dead_at = kAlive;
    for (size_t j = valid; j < cur.size(); ++j) {
      runner_.advance(history_[j], uint8_t(cur[j]), history_[j + 1]);
      valid = j + 1;
      if (history_[j + 1].empty()) {
        dead_at = j + 1;
        break;
      }
    }
    if (dead_at == kAlive || (dead_at == cur.size() && history_[dead_at].accepting)) mask.set(ids[k]);
  }
}

bool MaskBuilder::advance_bytes(const StackSet& set, std::string_view bytes, StackSet& out) {
  out = set;
  StackSet next;
  for (char c : bytes) {
    if (out.empty()) {
      out.clear();
      return false;
    }
    runner_.advance(out, uint8_t(c), next);
    std::swap(out, next);
  }
  return !out.dead();
}

}  // namespace tessera::grammar
