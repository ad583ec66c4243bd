// The LRU of compiled grammars.
#include "grammar/grammar_cache.h"

namespace tessera::grammar {

std::shared_ptr<const Grammar> GrammarCache::get(const std::string& key,
                                                 const std::function<std::shared_ptr<const Grammar>()>& compile) {
  {
    std::lock_guard lock(mutex_);
    if (const auto it = index_.find(key); it != index_.end()) {
      ++stats_.hits;
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->grammar;
    }
    ++stats_.misses;
  }
  std::shared_ptr<const Grammar> grammar = compile();
  std::lock_guard lock(mutex_);
  if (const auto it = index_.find(key); it != index_.end()) return it->second->grammar;  // compiled meanwhile
  lru_.push_front({key, grammar});
  index_.emplace(key, lru_.begin());
  evict_locked();
  return grammar;
}

void GrammarCache::evict_locked() {
  // Grammars' mask caches grow while they are used: the total is counted again here.
  uint64_t total = 0;
  for (const Entry& e : lru_) total += e.grammar->bytes() + e.key.size() * 2;
  while (total > max_bytes_ && !lru_.empty()) {
    const Entry& last = lru_.back();
    total -= last.grammar->bytes() + last.key.size() * 2;
    index_.erase(last.key);
    lru_.pop_back();  // requests using it keep their shared pointer
  }
  stats_.entries = lru_.size();
  stats_.bytes = total;
}

GrammarCacheStats GrammarCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace tessera::grammar
