// What `tessera serve` configures in the service: names, keys, limits, caches, timeouts, the chat template and
// the origin policy. One struct, read by the routes, the gateway, request preparation and the lifecycle.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling_params.h"
#include "server/auth.h"
#include "server/metric_names.h"
#include "server/openai_json.h"
#include "server/origin_policy.h"
#include "server/rate_limiter.h"

namespace tessera::server {

struct ServiceOptions {
  std::string model_name;               // what /v1/models lists and requests must name (or omit)
  std::string fallback_model_name;      // the fallback's own name: its answers are cached under it
  std::string metrics_prefix = std::string(kDefaultMetricsPrefix);
  std::vector<ApiKey> api_keys;         // empty: no authentication, and one tenant
  bool metrics_public = false;          // with keys: /metrics answers without one too
  bool shared_prefix_cache = false;     // tenants share cached prompt prefixes (always so without keys)
  RateLimits rate_limits;               // per key unless the key sets its own; per client address without keys
  int64_t max_queue = 1024;             // engine requests admitted and not yet scheduled; more is a 429
  uint64_t result_cache_bytes = 64ull << 20;  // 0: no result cache
  int64_t result_cache_ttl_ms = 10 * 60 * 1000;
  int64_t default_timeout_ms = 0;       // 0: no deadline unless the request sets one
  ParseLimits parse_limits;
  uint64_t max_response_bytes = 256ull << 20;  // a complete response that could be larger is a 400
  // What a request's sampling starts from: the model's recommended settings unless --generation-config none.
  SamplingParams base_sampling;
  // Replaces the model's chat template (tessera serve --chat-template FILE); set but empty: no template (the
  // contents-joined fallback). Absent: the model's own.
  std::optional<std::string> chat_template;
  OriginPolicy origins;                 // Host and browser Origin checks
  int parse_workers = 0;                // threads that parse, render and tokenize; 0: a quarter of the cores (1-4)
  size_t max_pending_parses = 4096;     // requests waiting for them; more is a 503 (serve: --max-connections)
  std::chrono::milliseconds health_recheck{10000};  // how often an engine marked bad is probed again
};

}  // namespace tessera::server
