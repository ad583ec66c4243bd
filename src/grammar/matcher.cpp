// Masks from the caches (or a walk on a miss), and the step over a sampled token.
#include "grammar/matcher.h"

#include <algorithm>

#include "core/error.h"

namespace tessera::grammar {

Matcher::Matcher(std::shared_ptr<const Constraint> constraint, std::shared_ptr<const Vocabulary> vocab)
    : constraint_(std::move(constraint)),
      vocab_(std::move(vocab)),
      cache_(constraint_->grammar->masks(*vocab_)),
      builder_(constraint_->grammar->automaton(), *vocab_) {
  builder_.runner().start(state_);
  const std::string& trigger = constraint_->trigger;
  if (trigger.empty()) return;
  in_grammar_ = false;
  if (!builder_.advance_bytes(state_, trigger, after_trigger_))
    fail("the constraint's grammar does not begin with its trigger '{}'", trigger);
  trigger_fail_.assign(trigger.size() + 1, 0);
  trigger_fail_[0] = -1;
  for (size_t i = 1; i <= trigger.size(); ++i) {
    int32_t k = trigger_fail_[i - 1];
    while (k >= 0 && trigger[size_t(k)] != trigger[i - 1]) k = trigger_fail_[size_t(k)];
    trigger_fail_[i] = k + 1;
  }
}

int32_t Matcher::scan_trigger(int32_t k, std::string_view bytes, size_t* completed_at) const {
  const std::string& trigger = constraint_->trigger;
  *completed_at = 0;
  for (size_t i = 0; i < bytes.size() && k >= 0; ++i) {
    if (constraint_->trigger_at_start) {
      k = bytes[i] == trigger[size_t(k)] ? k + 1 : -1;
    } else {
      while (k >= 0 && trigger[size_t(k)] != bytes[i]) k = trigger_fail_[size_t(k)];
      ++k;
    }
    if (k == int32_t(trigger.size())) {
      *completed_at = i + 1;
      return k;
    }
  }
  return k;
}

void Matcher::fill_mask(TokenMask& mask) {
  if (mask.size() != vocab_->n_vocab()) mask.resize(vocab_->n_vocab());
  if (in_grammar_) {
    fill_grammar_mask(mask);
  } else {
    fill_trigger_mask(mask);
  }
}

void Matcher::fill_grammar_mask(TokenMask& mask) {
  state_.serialize(key_);
  if (const std::shared_ptr<const TokenSet> cached = cache_->state_mask(key_)) {
    mask.clear();
    cached->add_to(mask);
    return;
  }
  mask.clear();
  candidates_.clear();
  // The per-state masks were walked with nothing below their state and nothing beside it. They hold here unless a
  // step of theirs could meet a PdaLimits bound in this set that it did not meet alone: a stack within a few
  // levels of max_depth, or several stacks whose steps together could pass max_stacks or max_visits. Then the
  // whole set is walked, against the real limits (a walk of the trie; its mask is cached like any other).
  const PdaLimits& limits = builder_.runner().limits();
  bool exact = true;
  size_t visits = 0, stacks = 0;
  bool limited = false;
  for (size_t i = 0; i < state_.size() && exact; ++i) {
    const int32_t top = state_.top(i);
    std::shared_ptr<const PositionMasks> position = cache_->position(top);
    if (!position) {
      position = std::make_shared<const PositionMasks>(builder_.position(top));
      cache_->put_position(top, position);
    }
    exact = int32_t(state_.stack(i).size()) - 1 + position->peak.depth <= limits.max_depth;
    visits += position->peak.visits;
    stacks += position->peak_stacks;
    limited = limited || position->peak.limited;
    position->accepted.add_to(mask);
    candidates_.insert(candidates_.end(), position->uncertain.begin(), position->uncertain.end());
  }
  if (state_.size() > 1)
    exact = exact && !limited && visits <= limits.max_visits() && stacks < size_t(limits.max_stacks);
  if (!exact) {
    mask.clear();
    builder_.walk_all(state_, mask);
  } else {
    if (state_.size() > 1) {
      std::sort(candidates_.begin(), candidates_.end());
      candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
      // A token one stack leaves its rule on is decided against the whole set even when another stack's mask
      // accepts it: the parses it returns below count against the limits too.
      const std::span<const int32_t> ids = vocab_->sorted_ids();
      for (uint32_t k : candidates_) mask.reset(ids[k]);
    }
    builder_.check(state_, candidates_, mask);
  }
  if (state_.accepting)
    for (int32_t id : vocab_->eog_ids()) mask.set(id);
  cache_->put_state_mask(key_, std::make_shared<const TokenSet>(mask));
}

void Matcher::fill_trigger_mask(TokenMask& mask) {
  mask.fill();
  if (trigger_k_ < 0) return;
  // Banned: tokens that complete the trigger and go on with bytes the grammar does not accept after it.
  // They depend only on how much of the trigger is matched, so they are cached per count.
  key_ = "trigger:" + std::to_string(trigger_k_) + (constraint_->trigger_at_start ? ":start:" : ":any:") +
         constraint_->trigger;
  std::shared_ptr<const TokenSet> banned = cache_->state_mask(key_);
  if (!banned) {
    TokenMask bans(vocab_->n_vocab());
    const std::span<const int32_t> ids = vocab_->sorted_ids();
    for (uint32_t k = 0; k < ids.size(); ++k) {
      const std::string_view bytes = vocab_->sorted_bytes(k);
      size_t end = 0;
      if (scan_trigger(trigger_k_, bytes, &end) == int32_t(constraint_->trigger.size()) &&
          !builder_.advance_bytes(after_trigger_, bytes.substr(end), scratch_))
        bans.set(ids[k]);
    }
    banned = std::make_shared<const TokenSet>(bans);
    cache_->put_state_mask(key_, banned);
  }
  banned->remove_from(mask);
}

bool Matcher::accept(int32_t token) {
  if (std::binary_search(vocab_->eog_ids().begin(), vocab_->eog_ids().end(), token))
    return !in_grammar_ || state_.accepting;
  const std::string_view bytes = vocab_->token_bytes(token);
  if (!in_grammar_) {
    if (trigger_k_ < 0) return true;
    size_t end = 0;
    const int32_t k = scan_trigger(trigger_k_, bytes, &end);
    if (k != int32_t(constraint_->trigger.size())) {
      trigger_k_ = k;
      return true;
    }
    if (!builder_.advance_bytes(after_trigger_, bytes.substr(end), scratch_)) return false;
    state_ = scratch_;
    in_grammar_ = true;
    return true;
  }
  if (bytes.empty() || !builder_.advance_bytes(state_, bytes, scratch_)) return false;
  std::swap(state_, scratch_);
  return true;
}

}  // namespace tessera::grammar
