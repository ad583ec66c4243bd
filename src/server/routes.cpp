// Service: the routes and the gateway checks in front of the engines.
#include "server/service.h"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdio>
#include <random>

#include "core/error.h"
#include "server/errors.h"
#include "server/generation.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {
namespace {

using nlohmann::json;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

PrepOptions prep_options(const ServiceOptions& o, const RequestLimits& limits) {
  PrepOptions p;
  p.model_name = o.model_name;
  p.limits = limits;
  p.parse_limits = o.parse_limits;
  p.base_sampling = o.base_sampling;
  p.default_timeout_ms = o.default_timeout_ms;
  p.max_response_bytes = o.max_response_bytes;
  return p;
}

}  // namespace

Service::Service(boost::asio::io_context& ioc, std::shared_ptr<Engine> primary, std::shared_ptr<Engine> fallback,
                 ServiceOptions options)
    : ioc_(ioc),
      primary_(std::move(primary)),
      fallback_(std::move(fallback)),
      options_(std::move(options)),
      n_ctx_(primary_->limits().n_ctx),
      keys_(options_.api_keys),
      cache_(options_.result_cache_bytes, std::chrono::milliseconds(options_.result_cache_ttl_ms)),
      scopes_(options_.shared_prefix_cache),
      metrics_(std::make_unique<Metrics>(options_.model_name, options_.metrics_prefix)),
      chat_template_(options_.chat_template.value_or(primary_->model().tokenizer().vocab().chat_template),
                     primary_->model().tokenizer().vocab()),
      encoder_(primary_->model().tokenizer()),
      preparer_(primary_->model().tokenizer(), chat_template_, encoder_, prep_options(options_, primary_->limits())),
      workers_(options_.parse_workers, options_.max_pending_parses) {
  started_unix_ = unix_now();
  next_id_ = std::random_device{}();
  Metrics* m = metrics_.get();
  primary_->set_step_observer([m](const StepStats& s) { m->observe_step(s); });
  if (fallback_) fallback_->set_step_observer([m](const StepStats& s) { m->observe_step(s); });
  m->set_ready(false);
  primary_health_ = std::make_unique<EngineHealth>("primary", primary_, options_.health_recheck,
                                                   [this] { update_ready_gauge(); });
  if (fallback_)
    fallback_health_ = std::make_unique<EngineHealth>("fallback", fallback_, options_.health_recheck,
                                                      [this] { update_ready_gauge(); });
}

Service::~Service() {
  primary_->set_step_observer(nullptr);
  if (fallback_) fallback_->set_step_observer(nullptr);
}

void Service::handle(HttpRequest&& request, std::shared_ptr<Responder> responder) {
  try {
    route(request, responder);
    return;
  } catch (const ApiException& e) {
    send_error(*responder, e.error());
    return;
  } catch (const std::bad_alloc&) {
    send_error(*responder, {ErrorCode::Internal, "out of memory"});
  } catch (const std::exception& e) {
    send_error(*responder, {ErrorCode::Internal, e.what()});
  } catch (...) {
    send_error(*responder, {ErrorCode::Internal, "unknown exception"});
  }
}

void Service::send_json(Responder& responder, int status, const json& body, const Headers& extra) {
  metrics_->count_status(status);
  responder.send(status, "application/json", dump_json(body), extra);
}

void Service::send_error(Responder& responder, const ApiError& error) {
  const int status = http_status(error.code);
  Headers extra;
  if (status == 429 || status == 503) extra.emplace_back("Retry-After", std::to_string(retry_after_seconds(error)));
  send_json(responder, status, error_body(error), extra);
}

Service::Client Service::authenticate(const HttpRequest& req, bool required) {
  Client client;
  client.limiter_key = req.remote;  // without keys: one bucket per client address
  client.limits = options_.rate_limits;
  if (!keys_.enabled()) return client;
  const ApiKey* key = keys_.check(req.header("Authorization"));
  if (!key && required) {
    metrics_->count_rejection("unauthorized");
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

void Service::check_origin(const HttpRequest& req) const {
  const std::string_view origin = req.header("Origin");
  if (!options_.origins.origin_allowed(origin))
    throw ApiException(ErrorCode::PermissionDenied,
                       "browser requests from origin '" + std::string(origin.substr(0, 200)) +
                           "' are not allowed (--cors-origins)");
}

void Service::answer_preflight(const HttpRequest& req, Responder& responder) {
  const std::string_view origin = req.header("Origin");
  if (!options_.origins.cors(origin)) {
    check_origin(req);  // a listed origin passes; anything else is a 403 naming it
    throw ApiException(ErrorCode::MethodNotAllowed, "method OPTIONS is not allowed here");
  }
  metrics_->count_status(204);
  responder.send(204, "text/plain", "",
                 {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                  {"Access-Control-Allow-Headers", "Authorization, Content-Type, X-Priority, X-Timeout-Ms"},
                  {"Access-Control-Max-Age", "600"}});
}

void Service::route(HttpRequest& req, const std::shared_ptr<Responder>& responder) {
  if (req.body_too_large)
    throw ApiException(ErrorCode::PayloadTooLarge, "the request body is larger than the server accepts");
  if (!options_.origins.host_allowed(req.header("Host")))
    throw ApiException(ErrorCode::PermissionDenied,
                       "the Host '" + std::string(req.header("Host").substr(0, 200)) +
                           "' is not one this server answers to (--allowed-hosts)");
  if (const std::string_view origin = req.header("Origin"); options_.origins.cors(origin)) {
    responder->add_response_header("Access-Control-Allow-Origin", std::string(origin));
    responder->add_response_header("Vary", "Origin");
  }
  const std::string_view path = req.path();
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  auto method_check = [&](bool ok) {
    if (!ok) throw ApiException(ErrorCode::MethodNotAllowed, "method " + req.method + " is not allowed here");
  };
  if (req.method == "OPTIONS") return answer_preflight(req, *responder);

  if (path == "/health") {
    method_check(get);
    send_json(*responder, 200, {{"status", "ok"}});
  } else if (path == "/ready") {
    method_check(get);
    const bool ok = ready() && !draining_;
    json body = {{"ready", ok}, {"primary", primary_health_->ok() ? "ok" : "failed"}, {"draining", draining_}};
    if (fallback_health_) body["fallback"] = fallback_health_->ok() ? "ok" : "failed";
    send_json(*responder, ok ? 200 : 503, body);
  } else if (path == "/metrics") {
    method_check(get);
    authenticate(req, !options_.metrics_public);
    send_metrics(*responder);
  } else if (path == "/v1/models") {
    method_check(get);
    authenticate(req, true);
    json model = {{"id", options_.model_name}, {"object", "model"},    {"created", started_unix_},
                  {"owned_by", "tessera"},     {"max_model_len", n_ctx_}};
    send_json(*responder, 200, {{"object", "list"}, {"data", json::array({model})}});
  } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
    method_check(post);
    check_origin(req);
    Client client = authenticate(req, true);
    handle_generation(path == "/v1/completions" ? Endpoint::Completions : Endpoint::ChatCompletions, req, responder,
                      std::move(client));
  } else {
    throw ApiException(ErrorCode::NotFound, "no route for " + req.method + " " + std::string(path));
  }
}

void Service::send_metrics(Responder& responder) {
  EngineStats s = primary_->stats();
  if (fallback_) {
    const EngineStats f = fallback_->stats();
    s.n_waiting += f.n_waiting;
    s.n_running += f.n_running;
  }
  metrics_->update_engine(s);
  responder.send(200, "text/plain; version=0.0.4; charset=utf-8", metrics_->serialize());
}

void Service::handle_generation(Endpoint endpoint, HttpRequest& http, const std::shared_ptr<Responder>& responder,
                                Client client) {
  if (draining_) {
    metrics_->count_rejection("draining");
    throw ApiException(ErrorCode::Unavailable, "the server is shutting down");
  }
  // Not ready means warming up, or no model passing its health check. A 503 then, not a queued request: a load
  // balancer without active health checks (open-source nginx) learns a replica is back only from its answers, so a
  // replica that is starting must send each request on to the next one until /ready.
  if (!ready()) {
    metrics_->count_rejection("not_ready");
    throw ApiException(ApiError(ErrorCode::Unavailable,
                                warmed_up_.load()
                                    ? "the model fails its health check and no fallback model passes; retry later"
                                    : "the server is warming up; retry later",
                                "", 1.0));
  }
  // The request-count limit comes before any work on the body: a client over its rate costs nothing more.
  const RateLimiter::Decision d = limiter_.acquire_request(client.limiter_key, client.limits);
  if (!d.allowed) {
    metrics_->count_rejection("rate_limit");
    throw ApiException(ApiError(ErrorCode::RateLimited, "rate limit reached (requests); retry later", "",
                                d.retry_after_s));
  }
  const auto arrival = Clock::now();
  auto job = [this, endpoint, responder, http = std::move(http), client = std::move(client), arrival]() mutable {
    std::optional<PreparedRequest> prepared;
    std::optional<ApiError> error;
    try {
      prepared = preparer_.prepare(endpoint, http, client.key);
    } catch (const ApiException& e) {
      error = e.error();
    } catch (const std::bad_alloc&) {
      error = ApiError{ErrorCode::Internal, "out of memory"};
    } catch (const std::exception& e) {
      error = ApiError{ErrorCode::Internal, e.what()};
    } catch (...) {
      error = ApiError{ErrorCode::Internal, "unknown exception"};
    }
    if (error && error->code == ErrorCode::ContextLengthExceeded) metrics_->count_rejection("too_long");
    // The job's reference to the responder moves to the io thread with the result: were it dropped here, after
    // the io thread had dropped its own (the client left meanwhile), the connection would be destroyed on this
    // thread, touching the HTTP server's session set under the io thread's feet.
    boost::asio::post(ioc_, [this, endpoint, responder = std::move(responder), prepared = std::move(prepared),
                             error = std::move(error), client = std::move(client), arrival]() mutable {
      if (error) return send_error(*responder, *error);
      try {
        admit(endpoint, responder, std::move(*prepared), client, arrival);
      } catch (const ApiException& e) {
        send_error(*responder, e.error());
      } catch (const std::exception& e) {
        send_error(*responder, {ErrorCode::Internal, e.what()});
      } catch (...) {
        send_error(*responder, {ErrorCode::Internal, "unknown exception"});
      }
    });
  };
  if (!workers_.post(std::move(job))) {
    metrics_->count_rejection("busy");
    throw ApiException(ApiError(ErrorCode::Unavailable, "the server is busy; retry later", "", 1.0));
  }
}

Engine* Service::engine_for_new_requests() {
  if (primary_health_->ok()) return primary_.get();
  if (fallback_ && fallback_health_->ok()) return fallback_.get();
  return nullptr;
}

void Service::admit(Endpoint endpoint, const std::shared_ptr<Responder>& responder, PreparedRequest prepared,
                    const Client& client, Clock::time_point arrival) {
  if (!responder->open()) return;  // the client left while its request was prepared
  if (draining_) {
    metrics_->count_rejection("draining");
    throw ApiException(ErrorCode::Unavailable, "the server is shutting down");
  }
  ApiRequest& req = prepared.request;
  const double charge = double(prepared.prompt.size()) + double(req.sampling.max_tokens) * req.n;
  const RateLimiter::Decision d = limiter_.acquire_tokens(client.limiter_key, client.limits, charge);
  if (!d.allowed) {
    metrics_->count_rejection("rate_limit");
    throw ApiException(ApiError(ErrorCode::RateLimited, "rate limit reached (tokens); retry later", "",
                                d.retry_after_s));
  }
  // From here on the charge is refunded on every way out but a started generation (which refunds what it
  // did not use when it ends).
  struct Refund {
    Service& s;
    const Client& c;
    double tokens;
    ~Refund() { s.limiter_.refund(c.limiter_key, c.limits, tokens); }
  } refund{*this, client, charge};

  Engine* engine = engine_for_new_requests();
  if (!engine) throw ApiException(ApiError(ErrorCode::Unavailable, "no model passes its health check; retry later", "", 5.0));

  ResponseHeader header;
  header.endpoint = endpoint;
  char id[32];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(next_id_++ * 0x9E3779B97F4A7C15ull));
  header.id = std::string(endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-") + id;
  header.created = unix_now();
  header.model = options_.model_name;

  Generation::Accounting accounting{{}, {}, client.limiter_key, client.limits, charge};
  if (cache_.enabled() && req.deterministic()) {
    accounting.cache_key = result_cache_key(req, options_.model_name, prepared.prompt, client.tenant);
    // "fallback:" keeps the fallback's answers apart even when both models go by one name (two copies of a file).
    accounting.fallback_cache_key =
        result_cache_key(req, "fallback:" + options_.fallback_model_name, prepared.prompt, client.tenant);
    const std::string& key = engine == fallback_.get() ? accounting.fallback_cache_key : accounting.cache_key;
    if (auto hit = cache_.get(key)) {
      metrics_->count_cache_hit();
      // A hit costs the tokens its answer holds, as the generation did: free hits would let a client without
      // any token budget left fetch one large cached answer again and again.
      double used = double(hit->prompt_tokens);
      for (const ChoiceResult& c : hit->choices) used += double(c.n_generated);
      refund.tokens = std::max(0.0, charge - used);
      replay(*responder, header, req, *hit);
      return;
    }
    metrics_->count_cache_miss();
  }

  // The queue bound is a reservation made here, on the io thread, at admission: a burst cannot slip past a
  // count the engine publishes once per step.
  if (n_queued_ + req.n > options_.max_queue) {
    metrics_->count_rejection("queue_full");
    throw ApiException(ApiError(ErrorCode::QueueFull, "the server's queue is full; retry later", "", 1.0));
  }

  std::optional<Clock::time_point> deadline;
  if (req.timeout_ms) deadline = arrival + std::chrono::milliseconds(*req.timeout_ms);
  req.cache_namespace = scopes_.prefix_namespace(client.tenant, req.cache_salt);
  auto gen = std::make_shared<Generation>(*this, responder, std::move(req), std::move(prepared.prompt),
                                          std::move(header), std::move(accounting), deadline);
  try {
    gen->start(*engine);
  } catch (const EngineUnavailable& e) {
    throw ApiException(ApiError(ErrorCode::Unavailable, e.what(), "", 1.0));
  } catch (const InvalidRequest& e) {  // the fallback's limits may be narrower than the primary's
    throw ApiException(api_error(e, endpoint == Endpoint::Completions ? "prompt" : "messages", false));
  } catch (const Error& e) {
    throw ApiException(ErrorCode::InvalidRequest, e.what());
  }
  refund.tokens = 0.0;
  if (live_.size() > 64 && live_.size() > 2 * size_t(n_in_flight_.load()))
    std::erase_if(live_, [](const std::weak_ptr<Generation>& w) { return w.expired(); });
  live_.push_back(gen);
}

void Service::replay(Responder& responder, const ResponseHeader& header, const ApiRequest& req,
                     const CachedResult& hit) {
  Usage usage;
  usage.prompt_tokens = hit.prompt_tokens;
  for (const ChoiceResult& c : hit.choices) usage.completion_tokens += c.n_generated;
  const Headers extra = {{"X-Tessera-Cache", "hit"}};
  if (!req.stream) {
    send_json(responder, 200, response_json(header, hit.choices, usage, req.logprobs), extra);
    return;
  }
  responder.start_stream(200, "text/event-stream", extra);
  for (size_t i = 0; i < hit.choices.size(); ++i) {
    const ChoiceResult& c = hit.choices[i];
    const std::vector<TokenInfo>* lp = req.logprobs ? &c.tokens : nullptr;
    responder.write(
        sse_event(dump_json(chunk_json(header, int32_t(i), c.text, true, lp, 0, c.finish_reason, req.include_usage))));
  }
  if (req.include_usage) responder.write(sse_event(dump_json(usage_chunk_json(header, usage))));
  responder.write(sse_done());
  responder.end_stream();
}

void Service::cancel_all() {
  for (auto& w : live_)
    if (auto g = w.lock()) g->cancel();
}

void Service::on_engine_error(const Engine* engine) {
  if (engine == primary_.get()) primary_health_->check_soon();
  else if (fallback_health_) fallback_health_->check_soon();
}

bool Service::ready() const {
  return warmed_up_.load() && (primary_health_->ok() || (fallback_health_ && fallback_health_->ok()));
}

void Service::update_ready_gauge() { metrics_->set_ready(ready()); }

bool Service::warm_up() {
  const bool primary = primary_health_->check_now();
  const bool fallback = fallback_health_ && fallback_health_->check_now();
  if (!primary) {
    std::fprintf(stderr, "warning: the primary model failed warm-up%s\n",
                 fallback ? "; requests go to the fallback until it passes a probe" : "");
  }
  warmed_up_ = true;
  update_ready_gauge();
  return primary || fallback;
}

void Service::mark_warmed_up() {
  warmed_up_ = true;
  update_ready_gauge();
}

}  // namespace tessera::server
