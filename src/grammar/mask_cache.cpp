// The per-grammar, per-vocabulary mask store.
#include "grammar/mask_cache.h"

namespace tessera::grammar {

std::shared_ptr<const PositionMasks> MaskCache::position(int32_t state) {
  std::lock_guard lock(mutex_);
  const auto it = positions_.find(state);
  if (it == positions_.end()) {
    ++stats_.position_misses;
    return nullptr;
  }
  ++stats_.position_hits;
  return it->second;
}

void MaskCache::put_position(int32_t state, std::shared_ptr<const PositionMasks> masks) {
  std::lock_guard lock(mutex_);
  const uint64_t bytes = masks->bytes();
  if (position_bytes_ + bytes > max_position_bytes_) {
    positions_.clear();
    position_bytes_ = 0;
  }
  if (positions_.emplace(state, std::move(masks)).second) position_bytes_ += bytes;
}

std::shared_ptr<const TokenSet> MaskCache::state_mask(const std::string& key) {
  std::lock_guard lock(mutex_);
  const auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.state_misses;
    return nullptr;
  }
  ++stats_.state_hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->mask;
}

void MaskCache::put_state_mask(const std::string& key, std::shared_ptr<const TokenSet> mask) {
  std::lock_guard lock(mutex_);
  if (index_.count(key)) return;
  const uint64_t bytes = mask->bytes() + key.size() * 2 + 64;
  if (bytes > max_state_bytes_) return;
  while (state_bytes_ + bytes > max_state_bytes_ && !lru_.empty()) {
    state_bytes_ -= lru_.back().bytes;
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  lru_.push_front({key, std::move(mask), bytes});
  index_.emplace(key, lru_.begin());
  state_bytes_ += bytes;
}

MaskCacheStats MaskCache::stats() const {
  std::lock_guard lock(mutex_);
  MaskCacheStats s = stats_;
  s.bytes = state_bytes_ + position_bytes_;
  return s;
}

}  // namespace tessera::grammar
