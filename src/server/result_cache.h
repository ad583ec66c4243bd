// Exact-match cache of finished results for deterministic requests (temperature 0, or a fixed seed): the same
// model, endpoint, sampling parameters and prompt tokens give the same text, so a repeat is served without the
// engine. LRU order, a time-to-live, and a cap on the bytes held. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/openai_json.h"

namespace tessera::server {

struct CachedResult {
  std::vector<ChoiceResult> choices;
  int64_t prompt_tokens = 0;
};

class ResultCache {
 public:
  using Clock = std::chrono::steady_clock;
  ResultCache(uint64_t max_bytes, std::chrono::milliseconds ttl) : max_bytes_(max_bytes), ttl_(ttl) {}

  bool enabled() const { return max_bytes_ > 0; }
  std::shared_ptr<const CachedResult> get(const std::string& key, Clock::time_point now = Clock::now());
  // Stores (or refreshes) `key`, evicting least recently used entries until the total fits. An entry bigger
  // than the whole cap is not stored.
  void put(const std::string& key, CachedResult value, Clock::time_point now = Clock::now());

  size_t size() const;
  uint64_t bytes() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const CachedResult> value;
    uint64_t bytes = 0;
    Clock::time_point expires;
  };
  void erase(std::list<Entry>::iterator it);

  uint64_t max_bytes_;
  std::chrono::milliseconds ttl_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // front: most recently used
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  uint64_t bytes_ = 0;
};

// The cache key of a request: the tenant (an API key's name: what one tenant asked is never a hit for another),
// the request's cache_salt, endpoint, model, every parameter that changes the output, and the prompts' tokens.
// Only meaningful when req.deterministic().
std::string result_cache_key(const ApiRequest& req, const std::string& model,
                             const std::vector<std::vector<int32_t>>& prompts, const std::string& tenant);
// Approximate heap bytes of a result (the memory cap counts these).
uint64_t result_bytes(const CachedResult& r);

}  // namespace tessera::server
