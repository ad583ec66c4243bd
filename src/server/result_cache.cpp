// LRU + TTL + byte cap result cache.
#include "server/result_cache.h"

#include <nlohmann/json.hpp>

namespace tessera::server {

std::shared_ptr<const CachedResult> ResultCache::get(const std::string& key, Clock::time_point now) {
  if (!enabled()) return nullptr;
  std::lock_guard lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  if (now >= it->second->expires) {
    erase(it->second);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->value;
}

void ResultCache::put(const std::string& key, CachedResult value, Clock::time_point now) {
  if (!enabled()) return;
  const uint64_t n = result_bytes(value) + key.size() + 128;
  if (n > max_bytes_) return;
  std::lock_guard lock(mutex_);
  if (auto it = index_.find(key); it != index_.end()) erase(it->second);
  lru_.push_front({key, std::make_shared<const CachedResult>(std::move(value)), n, now + ttl_});
  index_[key] = lru_.begin();
  bytes_ += n;
  while (bytes_ > max_bytes_ && !lru_.empty()) erase(std::prev(lru_.end()));
}

void ResultCache::erase(std::list<Entry>::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->key);
  lru_.erase(it);
}

size_t ResultCache::size() const {
  std::lock_guard lock(mutex_);
  return lru_.size();
}

uint64_t ResultCache::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

std::string result_cache_key(const ApiRequest& req, const std::string& model,
                             const std::vector<std::vector<int32_t>>& prompts, const std::string& tenant) {
  const SamplingParams& s = req.sampling;
  nlohmann::json logit_bias = nlohmann::json::array();
  for (const LogitBias& b : s.logit_bias) logit_bias.push_back({b.token, b.bias});
  nlohmann::json k = {
      {"tenant", tenant}, {"salt", req.cache_salt},
      {"e", int(req.endpoint)}, {"m", model}, {"t", s.is_greedy() ? 0.0f : s.temperature},
      {"k", s.top_k},           {"p", s.top_p}, {"mp", s.min_p}, {"rp", s.repetition_penalty},
      {"rw", s.repetition_window}, {"fp", s.frequency_penalty}, {"pp", s.presence_penalty},
      {"seed", s.is_greedy() ? 0 : s.seed}, {"mx", s.max_tokens}, {"stop", s.stop}, {"ie", s.ignore_eos},
      {"lb", logit_bias}, {"sti", s.stop_token_ids}, {"mt", s.min_tokens},
      {"n", req.n}, {"lp", req.logprobs}, {"tlp", req.top_logprobs}, {"echo", req.echo}, {"prompts", prompts},
      // An echo returns the prompt as written, which two texts of the same tokens do not share.
      {"texts", req.echo && !req.prompt_is_tokens ? req.prompts : std::vector<std::string>()},
      {"so", req.structured.constrained() ? req.structured.key() : std::string()},
      // A seeded sample draws other tokens (from the same distribution) with speculation; greedy ones do not.
      {"sp", s.is_greedy() || req.speculative}};
  return k.dump();
}

uint64_t result_bytes(const CachedResult& r) {
  uint64_t n = sizeof(CachedResult);
  for (const ChoiceResult& c : r.choices) {
    n += sizeof(ChoiceResult) + c.text.size();
    for (const TokenInfo& t : c.tokens) {
      n += sizeof(TokenInfo) + t.piece.size();
      for (const TokenAlternative& a : t.top) n += sizeof(TokenAlternative) + a.piece.size();
    }
  }
  return n;
}

}  // namespace tessera::server
