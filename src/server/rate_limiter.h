// Per-key token buckets: one for requests per second, one for tokens per minute (prompt + max_tokens charged
// on admission, the unused part refunded at the end). An empty bucket is a 429 whose Retry-After says when
// enough will have refilled. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tessera::server {

struct RateLimits {
  double requests_per_second = 0.0;  // 0: unlimited
  double request_burst = 0.0;        // bucket size; 0: max(1, requests_per_second)
  double tokens_per_minute = 0.0;    // 0: unlimited; also the bucket size
};

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(RateLimits limits) : limits_(limits) {}

  bool enabled() const { return limits_.requests_per_second > 0.0 || limits_.tokens_per_minute > 0.0; }

  struct Decision {
    bool allowed = true;
    double retry_after_s = 0.0;  // when denied
    const char* reason = "";     // "requests" or "tokens"
  };
  // Takes one request and `tokens` tokens from `key`'s buckets, or nothing when either is short. A request
  // larger than the whole token bucket is denied with the time to refill it completely.
  Decision acquire(const std::string& key, double tokens, Clock::time_point now = Clock::now());
  // Returns tokens charged but not used.
  void refund(const std::string& key, double tokens, Clock::time_point now = Clock::now());

 private:
  struct Bucket {
    double requests = 0.0;
    double tokens = 0.0;
    Clock::time_point last;
  };
  Bucket& bucket(const std::string& key, Clock::time_point now);
  double request_capacity() const;

  RateLimits limits_;
  std::mutex mutex_;
  std::unordered_map<std::string, Bucket> buckets_;  // guarded by mutex_; grows with distinct keys
};

}  // namespace tessera::server
