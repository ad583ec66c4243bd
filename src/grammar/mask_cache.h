// What one grammar has learned about one vocabulary, shared by every sequence that uses the grammar:
// per automaton state, the context-independent masks (mask_builder.h), and per whole parse state, the final
// masks (a JSON value of a given schema revisits the same few parse states every step). Thread-safe; entries
// are immutable and handed out as shared pointers, so a reader keeps what it got after an eviction.
// Bounded by bytes: full-state masks are evicted least recently used first; position masks, which are costly
// to rebuild, are only dropped all at once should they outgrow their own budget.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/mask_builder.h"
#include "grammar/token_set.h"

namespace tessera::grammar {

struct MaskCacheStats {
  uint64_t state_hits = 0, state_misses = 0;
  uint64_t position_hits = 0, position_misses = 0;
  uint64_t bytes = 0;
};

class MaskCache {
 public:
  MaskCache(uint64_t max_state_bytes, uint64_t max_position_bytes)
      : max_state_bytes_(max_state_bytes), max_position_bytes_(max_position_bytes) {}

  std::shared_ptr<const PositionMasks> position(int32_t state);
  void put_position(int32_t state, std::shared_ptr<const PositionMasks> masks);
  std::shared_ptr<const TokenSet> state_mask(const std::string& key);
  void put_state_mask(const std::string& key, std::shared_ptr<const TokenSet> mask);

  MaskCacheStats stats() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const TokenSet> mask;
    uint64_t bytes = 0;
  };
  mutable std::mutex mutex_;
  uint64_t max_state_bytes_, max_position_bytes_;
  std::unordered_map<int32_t, std::shared_ptr<const PositionMasks>> positions_;
  uint64_t position_bytes_ = 0;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  uint64_t state_bytes_ = 0;
  MaskCacheStats stats_;
};

}  // namespace tessera::grammar
