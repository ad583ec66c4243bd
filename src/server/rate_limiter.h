// Per-key token buckets: one for requests per second, one for tokens per minute (prompt + max_tokens charged
// on admission, the unused part refunded at the end). The request bucket is taken before any work is done on a
// request (parsing, the chat template, tokenizing), the token bucket once the prompt's length is known. An empty
// bucket is a 429 whose Retry-After says when enough will have refilled. Each key may have its own limits (the
// keys file); they are passed with every call. Thread-safe.
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

  bool limits_requests() const { return requests_per_second > 0.0; }
  bool limits_tokens() const { return tokens_per_minute > 0.0; }
};

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  struct Decision {
    bool allowed = true;
    double retry_after_s = 0.0;  // when denied
    const char* reason = "";     // "requests" or "tokens"
  };
  // Takes one request from `key`'s request bucket, or nothing when it is empty.
  Decision acquire_request(const std::string& key, const RateLimits& limits, Clock::time_point now = Clock::now());
  // Takes `tokens` from `key`'s token bucket, or nothing when it is short. A request larger than the whole
  // bucket is denied with the time to refill it completely.
  Decision acquire_tokens(const std::string& key, const RateLimits& limits, double tokens,
                          Clock::time_point now = Clock::now());
  // Returns tokens charged but not used.
  void refund(const std::string& key, const RateLimits& limits, double tokens, Clock::time_point now = Clock::now());

 private:
  struct Bucket {
    double requests = 0.0;
    double tokens = 0.0;
    Clock::time_point last;
  };
  Bucket& bucket(const std::string& key, const RateLimits& limits, Clock::time_point now);

  std::mutex mutex_;
  std::unordered_map<std::string, Bucket> buckets_;  // guarded by mutex_; grows with distinct keys
};

}  // namespace tessera::server
