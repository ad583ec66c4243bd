// The OpenAI-compatible service: routes, gateway checks (auth, rate limit, queue bound, result cache) and the
// engines behind them (a primary and an optional fallback replica). Lives on the io_context thread; engine
// events are posted back to it.
#pragma once

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/auth.h"
#include "server/chat_template.h"
#include "server/errors.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_json.h"
#include "server/rate_limiter.h"
#include "server/result_cache.h"

namespace tessera::server {

struct ServiceOptions {
  std::string model_name;               // what /v1/models lists and requests must name (or omit)
  std::string metrics_prefix = std::string(kDefaultMetricsPrefix);
  std::vector<std::string> api_keys;    // empty: no authentication
  bool metrics_require_key = false;
  RateLimits rate_limits;
  int64_t max_queue = 1024;             // engine requests waiting; more is a 429
  uint64_t result_cache_bytes = 64ull << 20;  // 0: no result cache
  int64_t result_cache_ttl_ms = 10 * 60 * 1000;
  int64_t default_timeout_ms = 0;       // 0: no deadline unless the request sets one
  ParseLimits parse_limits;
  // What a request's sampling starts from: the model's recommended settings unless --generation-config none.
  SamplingParams base_sampling;
  // Replaces the model's chat template (tessera serve --chat-template FILE); set but empty: no template (the
  // contents-joined fallback). Absent: the model's own.
  std::optional<std::string> chat_template;
};

class Generation;

class Service {
 public:
  // `fallback` may be null. Both engines must serve models with the same tokenizer.
  Service(boost::asio::io_context& ioc, std::shared_ptr<Engine> primary, std::shared_ptr<Engine> fallback,
          ServiceOptions options);
  ~Service();

  // The HTTP handler (io thread).
  void handle(HttpRequest&& request, std::shared_ptr<Responder> responder);

  // Dummy inference through prefill, decode and a batch on each engine; /ready turns true when it passes.
  // Blocking: run it off the io thread. Returns false when no engine passed.
  bool warm_up();
  bool ready() const { return ready_.load(); }

  // Drain: new requests get 503; in-flight ones go on. cancel_all() ends what is left (drain timeout).
  void begin_drain() { draining_ = true; }
  void cancel_all();
  int64_t n_in_flight() const { return n_in_flight_.load(); }

  Metrics& metrics() { return *metrics_; }
  bool has_chat_template() const { return chat_template_.has_template(); }

 private:
  friend class Generation;

  void route(HttpRequest& request, const std::shared_ptr<Responder>& responder);
  void handle_generation(Endpoint endpoint, HttpRequest& request, const std::shared_ptr<Responder>& responder,
                         const std::string& client_key);
  void send_json(Responder& responder, int status, const nlohmann::json& body, const Headers& extra = {});
  void send_error(Responder& responder, const ApiError& error);
  std::vector<int32_t> tokenize_prompt(const ApiRequest& request) const;
  // Called by a Generation when its primary engine failed and no fallback exists: /ready turns false.
  void mark_primary_failed();

  boost::asio::io_context& ioc_;
  std::shared_ptr<Engine> primary_;
  std::shared_ptr<Engine> fallback_;
  ServiceOptions options_;
  int64_t n_ctx_ = 0;
  ApiKeys keys_;
  RateLimiter limiter_;
  ResultCache cache_;
  std::unique_ptr<Metrics> metrics_;
  ChatTemplate chat_template_;
  SpecialTokenEncoder encoder_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> primary_ok_{true};
  bool draining_ = false;
  std::atomic<int64_t> n_in_flight_{0};
  std::vector<std::weak_ptr<Generation>> live_;  // for cancel_all (io thread); pruned as it grows
  uint64_t next_id_ = 0;
  int64_t started_unix_ = 0;
};

}  // namespace tessera::server
