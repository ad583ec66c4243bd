// The gateway in front of the engines: who is asking (API key, tenant), whether a request may come in (Host and
// browser Origin, the request and token rate limits, the queue bound) and the result cache that may answer it
// without an engine. Io thread only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "server/auth.h"
#include "server/cache_scope.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/rate_limiter.h"
#include "server/result_cache.h"
#include "server/service_options.h"

namespace tessera::server {

// Who is asking: the key (null without keys), where its rate limits are counted, and the tenant its caches
// belong to.
struct Client {
  const ApiKey* key = nullptr;
  std::string limiter_key;
  RateLimits limits;
  std::string tenant;
};

class Gateway {
 public:
  // Keeps references to both.
  Gateway(const ServiceOptions& options, Metrics& metrics);

  // Every route: the Host header must be one this server answers to. Throws ApiException (403).
  void check_host(const HttpRequest& request) const;
  // Requests that act (generation): a browser's Origin must be allowed. Throws ApiException (403).
  void check_origin(const HttpRequest& request) const;
  // `required`: with keys configured, a missing or wrong key is a 401. Without keys, one bucket per client
  // address and one tenant.
  Client authenticate(const HttpRequest& request, bool required);

  // The request-count limit, taken before any work on the body: a client over its rate costs nothing more.
  void take_request(const Client& client);
  // The token budget (prompt + max_tokens per choice), taken at admission; the part a generation did not use
  // is refunded when it ends. Both throw a 429 naming what ran out.
  void take_tokens(const Client& client, double tokens);
  void refund_tokens(const std::string& limiter_key, const RateLimits& limits, double tokens);

  // Queue slots: an engine request holds one from admission until it leaves the engine's queue (its Started
  // event, or any first event). The bound is a reservation made at admission, on the io thread: a burst cannot
  // slip past a count the engine publishes once per step. check_queue throws a 429 when `n` more do not fit.
  void check_queue(int64_t n) const;
  void take_queue_slot() { ++n_queued_; }
  void release_queue_slots(int64_t n) { n_queued_ -= n; }

  ResultCache& cache() { return cache_; }
  // The prefix-cache namespace of a tenant's request (see cache_scope.h).
  uint64_t prefix_namespace(std::string_view tenant, std::string_view salt) const {
    return scopes_.prefix_namespace(tenant, salt);
  }

 private:
  const ServiceOptions& options_;
  Metrics& metrics_;
  ApiKeys keys_;
  RateLimiter limiter_;
  ResultCache cache_;
  CacheScopes scopes_;
  int64_t n_queued_ = 0;  // queue slots held
};

}  // namespace tessera::server
