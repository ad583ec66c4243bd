// The OpenAI-compatible service: routes, gateway checks (Host and Origin, auth and the key's allowance, rate
// limits, queue bound, result cache) and the engines behind them (a primary and an optional fallback replica).
// The io thread does only what is cheap and stateful; parsing, the chat template and tokenizing run on a few
// worker threads (RequestWorkers), after the request-count limit. Engine events are posted back to the io
// thread.
#pragma once

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/auth.h"
#include "server/cache_scope.h"
#include "server/chat_template.h"
#include "server/engine_health.h"
#include "server/errors.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_json.h"
#include "server/origin_policy.h"
#include "server/rate_limiter.h"
#include "server/request_prep.h"
#include "server/request_workers.h"
#include "server/result_cache.h"

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

class Generation;

class Service {
 public:
  // `fallback` may be null. Both engines must serve models with the same tokenizer.
  Service(boost::asio::io_context& ioc, std::shared_ptr<Engine> primary, std::shared_ptr<Engine> fallback,
          ServiceOptions options);
  ~Service();

  // The HTTP handler (io thread).
  void handle(HttpRequest&& request, std::shared_ptr<Responder> responder);

  // Probes each engine (dummy inference through prefill, decode and a batch); /ready turns true when one
  // passes. Blocking: run it off the io thread. Returns false when no engine passed.
  bool warm_up();
  // Ready without the warm-up probe, for an engine known to work whose probe could not run promptly (one that
  // batches by a long time window). Until warm_up() or this, generation requests get a 503.
  void mark_warmed_up();
  bool ready() const;

  // Drain: new requests get 503; in-flight ones go on. cancel_all() ends what is left (drain timeout).
  void begin_drain() { draining_ = true; }
  void cancel_all();
  int64_t n_in_flight() const { return n_in_flight_.load(); }

  Metrics& metrics() { return *metrics_; }
  bool has_chat_template() const { return chat_template_.has_template(); }

 private:
  friend class Generation;

  // Who is asking: the key (null without keys), where its rate limits are counted, and the tenant its caches
  // belong to.
  struct Client {
    const ApiKey* key = nullptr;
    std::string limiter_key;
    RateLimits limits;
    std::string tenant;
  };

  void route(HttpRequest& request, const std::shared_ptr<Responder>& responder);
  Client authenticate(const HttpRequest& request, bool required);
  void check_origin(const HttpRequest& request) const;
  void answer_preflight(const HttpRequest& request, Responder& responder);
  void send_metrics(Responder& responder);
  // Request-count limit, then the CPU work on a worker thread; admit() continues on the io thread.
  void handle_generation(Endpoint endpoint, HttpRequest& request, const std::shared_ptr<Responder>& responder,
                         Client client);
  void admit(Endpoint endpoint, const std::shared_ptr<Responder>& responder, PreparedRequest prepared,
             const Client& client, Clock::time_point arrival);
  void replay(Responder& responder, const ResponseHeader& header, const ApiRequest& request,
              const CachedResult& hit);
  void send_json(Responder& responder, int status, const nlohmann::json& body, const Headers& extra = {});
  void send_error(Responder& responder, const ApiError& error);
  // The engine new requests go to: the primary while it passes its probes, else the fallback while it does;
  // null when neither does.
  Engine* engine_for_new_requests();
  // A request failed inside `engine`: probe it, so that one bad request does not condemn it but a broken engine
  // is found.
  void on_engine_error(const Engine* engine);
  void update_ready_gauge();
  // Queue slots: an engine request holds one from admission until it leaves the engine's queue (its Started
  // event, or any first event).
  void release_queue_slots(int64_t n) { n_queued_ -= n; }

  boost::asio::io_context& ioc_;
  std::shared_ptr<Engine> primary_;
  std::shared_ptr<Engine> fallback_;
  ServiceOptions options_;
  int64_t n_ctx_ = 0;
  ApiKeys keys_;
  RateLimiter limiter_;
  ResultCache cache_;
  CacheScopes scopes_;
  std::unique_ptr<Metrics> metrics_;
  ChatTemplate chat_template_;
  SpecialTokenEncoder encoder_;
  RequestPreparer preparer_;
  std::atomic<bool> warmed_up_{false};
  bool draining_ = false;
  std::atomic<int64_t> n_in_flight_{0};
  int64_t n_queued_ = 0;  // io thread: queue slots held (see release_queue_slots)
  std::vector<std::weak_ptr<Generation>> live_;  // for cancel_all (io thread); pruned as it grows
  uint64_t next_id_ = 0;
  int64_t started_unix_ = 0;
  // Last: their threads call back into the members above, so they stop first.
  std::unique_ptr<EngineHealth> primary_health_;
  std::unique_ptr<EngineHealth> fallback_health_;
  RequestWorkers workers_;
};

}  // namespace tessera::server
