// Token-bucket rate limiting.
#include "server/rate_limiter.h"

#include <algorithm>

namespace tessera::server {

double RateLimiter::request_capacity() const {
  return limits_.request_burst > 0.0 ? limits_.request_burst : std::max(1.0, limits_.requests_per_second);
}

RateLimiter::Bucket& RateLimiter::bucket(const std::string& key, Clock::time_point now) {
  // Keys idle for a minute have refilled completely and carry no state worth keeping: drop them so that many
  // distinct keys (clients) do not grow the map without bound.
  if (buckets_.size() >= 4096 && buckets_.find(key) == buckets_.end())
    std::erase_if(buckets_, [&](const auto& kv) { return now - kv.second.last > std::chrono::seconds(60); });
  auto [it, inserted] = buckets_.try_emplace(key);
  Bucket& b = it->second;
  if (inserted) {
    b.requests = request_capacity();
    b.tokens = limits_.tokens_per_minute;
    b.last = now;
    return b;
  }
  const double dt = std::max(0.0, std::chrono::duration<double>(now - b.last).count());
  b.last = std::max(b.last, now);
  b.requests = std::min(request_capacity(), b.requests + dt * limits_.requests_per_second);
  b.tokens = std::min(limits_.tokens_per_minute, b.tokens + dt * limits_.tokens_per_minute / 60.0);
  return b;
}

RateLimiter::Decision RateLimiter::acquire(const std::string& key, double tokens, Clock::time_point now) {
  if (!enabled()) return {};
  std::lock_guard lock(mutex_);
  Bucket& b = bucket(key, now);
  Decision d;
  if (limits_.requests_per_second > 0.0 && b.requests < 1.0) {
    d.allowed = false;
    d.reason = "requests";
    d.retry_after_s = (1.0 - b.requests) / limits_.requests_per_second;
  }
  if (limits_.tokens_per_minute > 0.0) {
    const double need = std::min(tokens, limits_.tokens_per_minute);
    if (b.tokens < need) {
      const double wait = (need - b.tokens) * 60.0 / limits_.tokens_per_minute;
      if (d.allowed || wait > d.retry_after_s) d.reason = "tokens";
      d.allowed = false;
      d.retry_after_s = std::max(d.retry_after_s, wait);
    }
  }
  if (!d.allowed) return d;
  if (limits_.requests_per_second > 0.0) b.requests -= 1.0;
  if (limits_.tokens_per_minute > 0.0) b.tokens -= tokens;  // may go negative for an oversized request
  return d;
}

void RateLimiter::refund(const std::string& key, double tokens, Clock::time_point now) {
  if (limits_.tokens_per_minute <= 0.0 || tokens <= 0.0) return;
  std::lock_guard lock(mutex_);
  Bucket& b = bucket(key, now);
  b.tokens = std::min(limits_.tokens_per_minute, b.tokens + tokens);
}

}  // namespace tessera::server
