// The gateway's checks: host and origin, keys, rate limits, the queue bound.
#include "server/gateway.h"

#include "server/errors.h"

namespace tessera::server {

Gateway::Gateway(const ServiceOptions& options, Metrics& metrics)
    : options_(options),
      metrics_(metrics),
      keys_(options.api_keys),
      cache_(options.result_cache_bytes, std::chrono::milliseconds(options.result_cache_ttl_ms)),
      scopes_(options.shared_prefix_cache) {}

void Gateway::check_host(const HttpRequest& req) const {
  if (!options_.origins.host_allowed(req.header("Host")))
    throw ApiException(ErrorCode::PermissionDenied,
                       "the Host '" + std::string(req.header("Host").substr(0, 200)) +
                           "' is not one this server answers to (its allowed hosts)");
}

void Gateway::check_origin(const HttpRequest& req) const {
  const std::string_view origin = req.header("Origin");
  if (!options_.origins.origin_allowed(origin))
    throw ApiException(ErrorCode::PermissionDenied,
                       "browser requests from origin '" + std::string(origin.substr(0, 200)) +
                           "' are not allowed (not among its CORS origins)");
}

Client Gateway::authenticate(const HttpRequest& req, bool required) {
  Client client;
  client.limiter_key = req.remote;  // without keys: one bucket per client address
  client.limits = options_.rate_limits;
  if (!keys_.enabled()) return client;
  const ApiKey* key = keys_.check(req.header("Authorization"));
  if (!key && required) {
    metrics_.count_rejection("unauthorized");
    throw ApiException(ErrorCode::Unauthorized, req.header("Authorization").empty()
                                                    ? "missing API key: send 'Authorization: Bearer <key>'"
                                                    : "incorrect API key provided");
  }
  if (key) {
    client.key = key;
    client.limiter_key = "key:" + std::to_string(keys_.position(*key));  // each key its own buckets
    client.limits = key->limits(options_.rate_limits);
    client.tenant = key->name;
  }
  return client;
}

void Gateway::take_request(const Client& client) {
  const RateLimiter::Decision d = limiter_.acquire_request(client.limiter_key, client.limits);
  if (!d.allowed) {
    metrics_.count_rejection("rate_limit");
    throw ApiException(ApiError(ErrorCode::RateLimited, "rate limit reached (requests); retry later", "",
                                d.retry_after_s));
  }
}

void Gateway::take_tokens(const Client& client, double tokens) {
  const RateLimiter::Decision d = limiter_.acquire_tokens(client.limiter_key, client.limits, tokens);
  if (!d.allowed) {
    metrics_.count_rejection("rate_limit");
    throw ApiException(ApiError(ErrorCode::RateLimited, "rate limit reached (tokens); retry later", "",
                                d.retry_after_s));
  }
}

void Gateway::refund_tokens(const std::string& limiter_key, const RateLimits& limits, double tokens) {
  limiter_.refund(limiter_key, limits, tokens);
}

void Gateway::check_queue(int64_t n) const {
  // More choices than the whole queue holds would be refused on every retry: a 400, not a 429.
  if (n > options_.max_queue)
    throw ApiException(ErrorCode::InvalidRequest,
                       "the request asks for " + std::to_string(n) + " choices (prompts x n), more than this server's "
                           "queue holds (" + std::to_string(options_.max_queue) + ")",
                       "n");
  if (n_queued_ + n > options_.max_queue) {
    metrics_.count_rejection("queue_full");
    throw ApiException(ApiError(ErrorCode::QueueFull, "the server's queue is full; retry later", "", 1.0));
  }
}

}  // namespace tessera::server
