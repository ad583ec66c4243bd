// Service: the routes and the gateway checks in front of the engines.
#include "server/service.h"

#include <boost/asio/post.hpp>

#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <mutex>
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

std::optional<int64_t> header_int(const HttpRequest& req, std::string_view name, int64_t lo, int64_t hi) {
  const std::string_view v = req.header(name);
  if (v.empty()) return std::nullopt;
  int64_t x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi)
    throw ApiException(ErrorCode::InvalidRequest,
                       "header " + std::string(name) + " must be an integer between " + std::to_string(lo) +
                           " and " + std::to_string(hi));
  return x;
}

}  // namespace

Service::Service(boost::asio::io_context& ioc, std::shared_ptr<Engine> primary, std::shared_ptr<Engine> fallback,
                 ServiceOptions options)
    : ioc_(ioc),
      primary_(std::move(primary)),
      fallback_(std::move(fallback)),
      options_(std::move(options)),
      keys_(options_.api_keys),
      limiter_(options_.rate_limits),
      cache_(options_.result_cache_bytes, std::chrono::milliseconds(options_.result_cache_ttl_ms)),
      metrics_(std::make_unique<Metrics>(options_.model_name, options_.metrics_prefix)),
      chat_template_(options_.chat_template.value_or(primary_->model().tokenizer().vocab().chat_template),
                     primary_->model().tokenizer().vocab()),
      encoder_(primary_->model().tokenizer()) {
  n_ctx_ = primary_->options().n_ctx > 0 ? primary_->options().n_ctx : primary_->model().config().n_ctx_train;
  started_unix_ = unix_now();
  next_id_ = std::random_device{}();
  Metrics* m = metrics_.get();
  primary_->set_step_observer([m](const StepStats& s) { m->observe_step(s); });
  if (fallback_) fallback_->set_step_observer([m](const StepStats& s) { m->observe_step(s); });
  m->set_ready(false);
}

Service::~Service() {
  primary_->set_step_observer(nullptr);
  if (fallback_) fallback_->set_step_observer(nullptr);
}

void Service::handle(HttpRequest&& request, std::shared_ptr<Responder> responder) {
  try {
    route(request, responder);
  } catch (const ApiException& e) {
    send_error(*responder, e.error());
  } catch (const std::bad_alloc&) {
    send_error(*responder, {ErrorCode::Internal, "out of memory"});
  } catch (const std::exception& e) {
    send_error(*responder, {ErrorCode::Internal, e.what()});
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

void Service::route(HttpRequest& req, const std::shared_ptr<Responder>& responder) {
  if (req.body_too_large)
    throw ApiException(ErrorCode::PayloadTooLarge, "the request body is larger than the server accepts");
  const std::string_view path = req.path();
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  auto require_key = [&](bool needed) -> std::string {
    if (!needed || !keys_.enabled()) return {};
    auto key = keys_.check(req.header("Authorization"));
    if (!key) {
      metrics_->count_rejection("unauthorized");
      throw ApiException(ErrorCode::Unauthorized,
                         req.header("Authorization").empty()
                             ? "missing API key: send 'Authorization: Bearer <key>'"
                             : "incorrect API key provided");
    }
    return *key;
  };
  auto method_check = [&](bool ok) {
    if (!ok) throw ApiException(ErrorCode::MethodNotAllowed, "method " + req.method + " is not allowed here");
  };

  if (path == "/health") {
    method_check(get);
    send_json(*responder, 200, {{"status", "ok"}});
  } else if (path == "/ready") {
    method_check(get);
    const bool ok = ready_.load() && !draining_;
    send_json(*responder, ok ? 200 : 503,
              {{"ready", ok}, {"primary", primary_ok_.load() ? "ok" : "failed"}, {"draining", draining_}});
  } else if (path == "/metrics") {
    method_check(get);
    require_key(options_.metrics_require_key);
    EngineStats s = primary_->stats();
    if (fallback_) {
      const EngineStats f = fallback_->stats();
      s.n_waiting += f.n_waiting;
      s.n_running += f.n_running;
    }
    metrics_->update_engine(s);
    responder->send(200, "text/plain; version=0.0.4; charset=utf-8", metrics_->serialize());
  } else if (path == "/v1/models") {
    method_check(get);
    require_key(true);
    json model = {{"id", options_.model_name}, {"object", "model"},    {"created", started_unix_},
                  {"owned_by", "tessera"},     {"max_model_len", n_ctx_}};
    send_json(*responder, 200, {{"object", "list"}, {"data", json::array({model})}});
  } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
    method_check(post);
    const std::string key = require_key(true);
    handle_generation(path == "/v1/completions" ? Endpoint::Completions : Endpoint::ChatCompletions, req, responder,
                      key.empty() ? req.remote : key);
  } else {
    throw ApiException(ErrorCode::NotFound, "no route for " + req.method + " " + std::string(path));
  }
}

std::vector<int32_t> Service::tokenize_prompt(const ApiRequest& r) const {
  const Tokenizer& tok = primary_->model().tokenizer();
  if (r.endpoint == Endpoint::ChatCompletions)
    return encoder_.encode(chat_template_.render(r.messages, r.chat_template_kwargs), true);
  if (r.prompt_is_tokens) {
    for (int32_t t : r.prompt_tokens)
      if (t < 0 || t >= tok.n_vocab())
        throw ApiException(ErrorCode::InvalidRequest, "token id " + std::to_string(t) + " is out of range", "prompt");
    return r.prompt_tokens;
  }
  return tok.encode(r.prompt, true);
}

void Service::handle_generation(Endpoint endpoint, HttpRequest& http, const std::shared_ptr<Responder>& responder,
                                const std::string& client_key) {
  if (draining_) {
    metrics_->count_rejection("draining");
    throw ApiException(ErrorCode::Unavailable, "the server is shutting down");
  }
  // Not ready means warming up, or a model that failed with nothing to fall back on. A 503 then, not a queued
  // request: a load balancer without active health checks (open-source nginx) learns a replica is back only
  // from its answers, so a replica that is starting must send each request on to the next one until /ready.
  if (!ready_.load()) {
    metrics_->count_rejection("not_ready");
    throw ApiException(ApiError(ErrorCode::Unavailable,
                                primary_ok_.load() ? "the server is warming up; retry later"
                                                   : "the model failed and there is no fallback model",
                                "", 1.0));
  }
  const json body = parse_body(http.body);
  ApiRequest req = endpoint == Endpoint::Completions
                       ? parse_completion_request(body, options_.parse_limits, options_.base_sampling)
                       : parse_chat_request(body, options_.parse_limits, options_.base_sampling);
  if (!req.priority) req.priority = header_int(http, "X-Priority", -1000000, 1000000);
  if (!req.timeout_ms) req.timeout_ms = header_int(http, "X-Timeout-Ms", 1, 24LL * 3600 * 1000);
  if (!req.timeout_ms && options_.default_timeout_ms > 0) req.timeout_ms = options_.default_timeout_ms;
  if (!req.model.empty() && req.model != options_.model_name)
    throw ApiException(ErrorCode::ModelNotFound, "the model '" + req.model + "' does not exist", "model");
  const auto arrival = Clock::now();

  std::vector<int32_t> prompt = tokenize_prompt(req);
  const int64_t room = n_ctx_ - int64_t(prompt.size());
  if (!req.max_tokens_given) {
    const int64_t wanted = endpoint == Endpoint::Completions ? 16 : room;
    req.sampling.max_tokens = int32_t(std::max<int64_t>(1, std::min(wanted, room)));
  }
  if (prompt.empty() || int64_t(prompt.size()) + req.sampling.max_tokens > n_ctx_) {
    metrics_->count_rejection("too_long");
    throw ApiException(ErrorCode::ContextLengthExceeded,
                       "this model's maximum context length is " + std::to_string(n_ctx_) +
                           " tokens; the request has " + std::to_string(prompt.size()) + " prompt tokens and " +
                           std::to_string(req.sampling.max_tokens) + " tokens to generate",
                       req.max_tokens_given ? "max_tokens" : (endpoint == Endpoint::Completions ? "prompt" : "messages"));
  }

  const double charge = double(prompt.size()) + double(req.sampling.max_tokens) * req.n;
  const RateLimiter::Decision d = limiter_.acquire(client_key, charge);
  if (!d.allowed) {
    metrics_->count_rejection("rate_limit");
    throw ApiException(ApiError(ErrorCode::RateLimited, std::string("rate limit reached (") + d.reason + "); retry later",
                                "", d.retry_after_s));
  }

  ResponseHeader header;
  header.endpoint = endpoint;
  char id[32];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(next_id_++ * 0x9E3779B97F4A7C15ull));
  header.id = std::string(endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-") + id;
  header.created = unix_now();
  header.model = options_.model_name;

  std::string cache_key;
  if (cache_.enabled() && req.deterministic()) {
    cache_key = result_cache_key(req, options_.model_name, prompt);
    if (auto hit = cache_.get(cache_key)) {
      metrics_->count_cache_hit();
      limiter_.refund(client_key, charge);
      Usage usage;
      usage.prompt_tokens = hit->prompt_tokens;
      for (const ChoiceResult& c : hit->choices) usage.completion_tokens += c.n_generated;
      const Headers extra = {{"X-Tessera-Cache", "hit"}};
      if (!req.stream) {
        send_json(*responder, 200, response_json(header, hit->choices, usage, req.logprobs), extra);
        return;
      }
      responder->start_stream(200, "text/event-stream", extra);
      for (size_t i = 0; i < hit->choices.size(); ++i) {
        const ChoiceResult& c = hit->choices[i];
        const std::vector<TokenInfo>* lp = req.logprobs ? &c.tokens : nullptr;
        responder->write(sse_event(dump_json(chunk_json(header, int32_t(i), c.text, true, lp, 0, c.finish_reason,
                                                        req.include_usage))));
      }
      if (req.include_usage) responder->write(sse_event(dump_json(usage_chunk_json(header, usage))));
      responder->write(sse_done());
      responder->end_stream();
      return;
    }
    metrics_->count_cache_miss();
  }

  const EngineStats stats = primary_->stats();
  if (stats.n_waiting + req.n > options_.max_queue) {
    limiter_.refund(client_key, charge);
    metrics_->count_rejection("queue_full");
    throw ApiException(ApiError(ErrorCode::QueueFull, "the server's queue is full; retry later", "", 1.0));
  }

  std::optional<Clock::time_point> deadline;
  if (req.timeout_ms) deadline = arrival + std::chrono::milliseconds(*req.timeout_ms);
  auto gen = std::make_shared<Generation>(*this, responder, std::move(req), std::move(prompt), std::move(header),
                                          std::move(cache_key), client_key, charge, deadline);
  try {
    gen->start();
  } catch (const Error& e) {
    limiter_.refund(client_key, charge);
    throw ApiException(ErrorCode::InvalidRequest, e.what());
  }
  if (live_.size() > 64 && live_.size() > 2 * size_t(n_in_flight_.load()))
    std::erase_if(live_, [](const std::weak_ptr<Generation>& w) { return w.expired(); });
  live_.push_back(gen);
}

void Service::cancel_all() {
  for (auto& w : live_)
    if (auto g = w.lock()) g->cancel();
}

void Service::mark_primary_failed() {
  primary_ok_ = false;
  if (!fallback_) {
    ready_ = false;
    metrics_->set_ready(false);
  }
}

bool Service::warm_up() {
  // Prefill (a prompt of a few tokens), decode (several tokens) and a batch (several sequences at once).
  auto run = [](Engine& engine, int n_seqs) {
    const Tokenizer& tok = engine.model().tokenizer();
    std::vector<int32_t> prompt = tok.encode("Once upon a time, there was a warm-up request.", true);
    // Shared with the callbacks, which may outlive this frame when the wait times out.
    struct State {
      std::mutex mu;
      std::condition_variable cv;
      int done = 0;
      bool ok = true;
    };
    auto st = std::make_shared<State>();
    for (int i = 0; i < n_seqs; ++i) {
      Request r;
      r.prompt = prompt;
      r.sampling.temperature = 0.0f;
      r.sampling.max_tokens = 4;
      r.sampling.ignore_eos = true;
      engine.submit(std::move(r), [st](const StreamEvent& ev) {
        if (ev.kind != StreamEvent::Kind::Finished) return;
        std::lock_guard lock(st->mu);
        st->ok = st->ok && ev.finish_reason != FinishReason::Error;
        ++st->done;
        st->cv.notify_all();
      });
    }
    std::unique_lock lock(st->mu);
    if (!st->cv.wait_for(lock, std::chrono::seconds(120), [&] { return st->done == n_seqs; })) return false;
    return st->ok;
  };
  auto warm = [&](Engine& e) {
    try {
      return run(e, 1) && run(e, 4);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "warm-up failed: %s\n", ex.what());
      return false;
    }
  };
  const bool primary = warm(*primary_);
  const bool fallback = fallback_ && warm(*fallback_);
  if (!primary) {
    std::fprintf(stderr, "warning: the primary model failed warm-up%s\n",
                 fallback ? "; requests will fall back" : "");
    primary_ok_ = false;
  }
  const bool ok = primary || fallback;
  ready_ = ok;
  metrics_->set_ready(ok);
  return ok;
}

}  // namespace tessera::server
