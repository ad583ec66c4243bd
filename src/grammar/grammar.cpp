// Mask caches per vocabulary.
#include "grammar/grammar.h"

namespace tessera::grammar {

std::shared_ptr<MaskCache> Grammar::masks(const Vocabulary& vocab) const {
  std::lock_guard lock(mutex_);
  for (const auto& [id, cache] : caches_)
    if (id == vocab.id()) return cache;
  caches_.emplace_back(vocab.id(), std::make_shared<MaskCache>(limits_.state_mask_bytes, limits_.position_mask_bytes));
  return caches_.back().second;
}

uint64_t Grammar::bytes() const {
  uint64_t n = automaton_.bytes();
  std::lock_guard lock(mutex_);
  for (const auto& [id, cache] : caches_) n += cache->stats().bytes;
  return n;
}

}  // namespace tessera::grammar
