// The service put together, and a generation request's way through it: gateway checks, preparation on a worker
// thread, admission (tokens, result cache, queue), then serving.
#include "server/service.h"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstdio>
#include <random>

#include "core/error.h"
#include "server/errors.h"
#include "server/generation.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {
namespace {

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
      options_(std::move(options)),
      n_ctx_(primary->limits().n_ctx),
      metrics_(std::make_unique<Metrics>(options_.model_name, options_.metrics_prefix)),
      gateway_(options_, *metrics_),
      chat_template_(options_.chat_template.value_or(primary->model().tokenizer().vocab().chat_template),
                     primary->model().tokenizer().vocab()),
      encoder_(primary->model().tokenizer()),
      structured_(ToolCallFormat::for_template(
          options_.chat_template.value_or(primary->model().tokenizer().vocab().chat_template))),
      preparer_(primary->model().tokenizer(), chat_template_, encoder_, structured_,
                prep_options(options_, primary->limits())),
      tokenization_(preparer_, primary->model().tokenizer()),
      workers_(options_.parse_workers, options_.max_pending_parses),
      body_builder_(1, options_.max_pending_parses, "response") {
  started_unix_ = unix_now();
  next_id_ = std::random_device{}();
  Metrics* m = metrics_.get();
  primary->set_step_observer([m](const StepStats& s) { m->observe_step(s); });
  if (fallback) fallback->set_step_observer([m](const StepStats& s) { m->observe_step(s); });
  lifecycle_ = std::make_unique<Lifecycle>(std::move(primary), std::move(fallback), options_.health_recheck, *m);
}

Service::~Service() {
  lifecycle_->primary().set_step_observer(nullptr);
  if (Engine* fallback = lifecycle_->fallback()) fallback->set_step_observer(nullptr);
}

void Service::handle_generation(Endpoint endpoint, HttpRequest& http, const std::shared_ptr<Responder>& responder,
                                Client client) {
  if (lifecycle_->draining()) {
    metrics_->count_rejection("draining");
    throw ApiException(ErrorCode::Unavailable, "the server is shutting down");
  }
  // Not ready means warming up, or no model passing its health check. A 503 then, not a queued request: a load
  // balancer without active health checks (open-source nginx) learns a replica is back only from its answers, so a
  // replica that is starting must send each request on to the next one until /ready.
  if (!lifecycle_->ready()) {
    metrics_->count_rejection("not_ready");
    throw ApiException(ApiError(ErrorCode::Unavailable,
                                lifecycle_->warmed_up()
                                    ? "the model fails its health check and no fallback model passes; retry later"
                                    : "the server is warming up; retry later",
                                "", 1.0));
  }
  gateway_.take_request(client);
  const auto arrival = Clock::now();
  // The job owns a copy of the pointer that it can move on: a capture of the const reference itself would stay
  // const, and its "move" below a copy that the worker drops last.
  auto job = [this, endpoint, responder = std::shared_ptr<Responder>(responder), http = std::move(http),
              client = std::move(client), arrival]() mutable {
    std::optional<PreparedRequest> prepared;
    std::optional<ApiError> error;
    try {
      prepared = preparer_.prepare(endpoint, http, client.key);
    } catch (...) {
      error = current_api_error();
    }
    if (error && error->code == ErrorCode::ContextLengthExceeded) metrics_->count_rejection("too_long");
    // The job's reference to the responder moves to the io thread with the result: were it dropped here, after
    // the io thread had dropped its own (the client left meanwhile), the connection would be destroyed on this
    // thread, touching the HTTP server's session set under the io thread's feet.
    boost::asio::post(ioc_, [this, endpoint, responder = std::move(responder), prepared = std::move(prepared),
                             error = std::move(error), client = std::move(client), arrival]() mutable {
      if (error) return send_error(*responder, *metrics_, *error);
      try {
        admit(endpoint, responder, std::move(*prepared), client, arrival);
      } catch (...) {
        send_error(*responder, *metrics_, current_api_error());
      }
    });
  };
  if (!workers_.post(std::move(job))) {
    metrics_->count_rejection("busy");
    throw ApiException(ApiError(ErrorCode::Unavailable, "the server is busy; retry later", "", 1.0));
  }
}

void Service::handle_tokenization(bool detokenize, HttpRequest& http, const std::shared_ptr<Responder>& responder,
                                  const Client& client) {
  gateway_.take_request(client);
  auto job = [this, detokenize, responder = std::shared_ptr<Responder>(responder), http = std::move(http)]() mutable {
    std::optional<std::string> answer;  // serialized here: a million token ids are no work for the io thread
    std::optional<ApiError> error;
    try {
      answer = dump_json(detokenize ? tokenization_.detokenize(http) : tokenization_.tokenize(http));
    } catch (...) {
      error = current_api_error();
    }
    // The responder goes back to the io thread with the answer, as in handle_generation.
    boost::asio::post(ioc_, [this, responder = std::move(responder), answer = std::move(answer),
                             error = std::move(error)]() mutable {
      if (error) return send_error(*responder, *metrics_, *error);
      metrics_->count_status(200);
      responder->send(200, "application/json", std::move(*answer));
    });
  };
  if (!workers_.post(std::move(job))) {
    metrics_->count_rejection("busy");
    throw ApiException(ApiError(ErrorCode::Unavailable, "the server is busy; retry later", "", 1.0));
  }
}

ResponseHeader Service::new_response_header(Endpoint endpoint) {
  ResponseHeader header;
  header.endpoint = endpoint;
  char id[32];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(next_id_++ * 0x9E3779B97F4A7C15ull));
  header.id = std::string(endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-") + id;
  header.created = unix_now();
  header.model = options_.model_name;
  return header;
}

void Service::admit(Endpoint endpoint, const std::shared_ptr<Responder>& responder, PreparedRequest prepared,
                    const Client& client, Clock::time_point arrival) {
  if (!responder->open()) return;  // the client left while its request was prepared
  if (lifecycle_->draining()) {
    metrics_->count_rejection("draining");
    throw ApiException(ErrorCode::Unavailable, "the server is shutting down");
  }
  ApiRequest& req = prepared.request;
  // Every prompt's tokens, and max_tokens for each of its n choices.
  double charge = 0.0;
  for (const std::vector<int32_t>& prompt : prepared.prompts)
    charge += double(prompt.size()) + double(req.sampling.max_tokens) * req.n;
  gateway_.take_tokens(client, charge);
  // From here on the charge is refunded on every way out but a started generation (which refunds what it
  // did not use when it ends).
  struct Refund {
    Gateway& g;
    const Client& c;
    double tokens;
    ~Refund() { g.refund_tokens(c.limiter_key, c.limits, tokens); }
  } refund{gateway_, client, charge};

  Engine* engine = lifecycle_->engine_for_new_requests();
  if (!engine) throw ApiException(ApiError(ErrorCode::Unavailable, "no model passes its health check; retry later", "", 5.0));

  ResponseHeader header = new_response_header(endpoint);
  const ServingContext context{ioc_, *metrics_, gateway_, *lifecycle_, lifecycle_->primary().model().tokenizer(),
                               structured_.tool_format(), body_builder_};
  Generation::Accounting accounting{{}, {}, client.limiter_key, client.limits, charge};
  // Not cached: requests with tools, and with prompt_logprobs (their list is not part of a cached result).
  if (gateway_.cache().enabled() && req.deterministic() && !req.structured.tools_active() && req.prompt_logprobs < 0) {
    accounting.cache_key = result_cache_key(req, options_.model_name, prepared.prompts, client.tenant);
    // "fallback:" keeps the fallback's answers apart even when both models go by one name (two copies of a file).
    accounting.fallback_cache_key =
        result_cache_key(req, "fallback:" + options_.fallback_model_name, prepared.prompts, client.tenant);
    const std::string& key = engine == lifecycle_->fallback() ? accounting.fallback_cache_key : accounting.cache_key;
    if (auto hit = gateway_.cache().get(key)) {
      metrics_->count_cache_hit();
      // A hit costs the tokens its answer holds, as the generation did: free hits would let a client without
      // any token budget left fetch one large cached answer again and again.
      double used = double(hit->prompt_tokens);
      for (const ChoiceResult& c : hit->choices) used += double(c.n_generated);
      refund.tokens = std::max(0.0, charge - used);
      replay(context, responder, header, req, std::move(hit));
      return;
    }
    metrics_->count_cache_miss();
  }
  gateway_.check_queue(int64_t(prepared.prompts.size()) * req.n);

  std::optional<Clock::time_point> deadline;
  if (req.timeout_ms) deadline = arrival + std::chrono::milliseconds(*req.timeout_ms);
  req.cache_namespace = gateway_.prefix_namespace(client.tenant, req.cache_salt);
  auto gen = std::make_shared<Generation>(context, responder, std::move(req), std::move(prepared.prompts),
                                          std::move(header), std::move(accounting), deadline);
  try {
    gen->start(*engine);
  } catch (const InvalidRequest& e) {  // the fallback's limits may be narrower than the primary's
    throw ApiException(api_error(e, endpoint == Endpoint::Completions ? "prompt" : "messages", false));
  } catch (const Error& e) {
    throw ApiException(engine_refusal(e));
  }
  refund.tokens = 0.0;
  lifecycle_->track(gen);
}

}  // namespace tessera::server
