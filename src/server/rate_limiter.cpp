// Token-bucket rate limiting.
#include "server/rate_limiter.h"

#include <algorithm>

namespace tessera::server {
namespace {

double request_capacity(const RateLimits& l) {
  return l.request_burst > 0.0 ? l.request_burst : std::max(1.0, l.requests_per_second);
}

}  // namespace

RateLimiter::Bucket& RateLimiter::bucket(const std::string& key, const RateLimits& limits, Clock::time_point now) {
  // Keys idle for a minute have refilled completely and carry no state worth keeping: drop them so that many
  // distinct keys (clients) do not grow the map without bound.
  if (buckets_.size() >= 4096 && buckets_.find(key) == buckets_.end())
    std::erase_if(buckets_, [&](const auto& kv) { return now - kv.second.last > std::chrono::seconds(60); });
  auto [it, inserted] = buckets_.try_emplace(key);
  Bucket& b = it->second;
  if (inserted) {
    b.requests = request_capacity(limits);
    b.tokens = limits.tokens_per_minute;
    b.last = now;
    return b;
  }
  const double dt = std::max(0.0, std::chrono::duration<double>(now - b.last).count());
  b.last = std::max(b.last, now);
  b.requests = std::min(request_capacity(limits), b.requests + dt * limits.requests_per_second);
  b.tokens = std::min(limits.tokens_per_minute, b.tokens + dt * limits.tokens_per_minute / 60.0);
  return b;
}

RateLimiter::Decision RateLimiter::acquire_request(const std::string& key, const RateLimits& limits,
                                                   Clock::time_point now) {
  if (!limits.limits_requests()) return {};
  std::lock_guard lock(mutex_);
  Bucket& b = bucket(key, limits, now);
  if (b.requests < 1.0) return {false, (1.0 - b.requests) / limits.requests_per_second, "requests"};
  b.requests -= 1.0;
  return {};
}

RateLimiter::Decision RateLimiter::acquire_tokens(const std::string& key, const RateLimits& limits, double tokens,
                                                  Clock::time_point now) {
  if (!limits.limits_tokens()) return {};
  std::lock_guard lock(mutex_);
  Bucket& b = bucket(key, limits, now);
  const double need = std::min(tokens, limits.tokens_per_minute);
  if (b.tokens < need) return {false, (need - b.tokens) * 60.0 / limits.tokens_per_minute, "tokens"};
  b.tokens -= tokens;  // may go negative for an oversized request
  return {};
}

void RateLimiter::refund(const std::string& key, const RateLimits& limits, double tokens, Clock::time_point now) {
  if (!limits.limits_tokens() || tokens <= 0.0) return;
  std::lock_guard lock(mutex_);
  Bucket& b = bucket(key, limits, now);
  b.tokens = std::min(limits.tokens_per_minute, b.tokens + tokens);
}

}  // namespace tessera::server
