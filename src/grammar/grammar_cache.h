// Compiled grammars by their source: a request's schema, regex, grammar or tool set is compiled once, and later
// requests with the same source (most of an application's traffic) share the automaton and every mask it has
// learned since. LRU, bounded by the bytes of the grammars and their mask caches (which grow after insertion, so
// the bound is checked again on each insertion). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/grammar.h"

namespace tessera::grammar {

struct GrammarCacheStats {
  uint64_t hits = 0, misses = 0;
  uint64_t entries = 0;
  uint64_t bytes = 0;  // as last counted
};

class GrammarCache {
 public:
  explicit GrammarCache(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // The grammar compiled from `key` (the exact source text: a hash picks the bucket, the whole key decides), made
  // by `compile` on a miss, outside the lock. Whatever `compile` throws goes to the caller, and nothing is kept.
  std::shared_ptr<const Grammar> get(const std::string& key,
                                     const std::function<std::shared_ptr<const Grammar>()>& compile);

  GrammarCacheStats stats() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const Grammar> grammar;
  };
  void evict_locked();

  uint64_t max_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  GrammarCacheStats stats_;
};

}  // namespace tessera::grammar
