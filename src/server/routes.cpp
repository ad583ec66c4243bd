// The routes: HTTP in, API types out and back. Which path and method go where, the answers that need no engine
// (/health, /ready, /v1/models, /metrics, CORS preflight; /tokenize and /detokenize need no engine), and every ApiException turned into its error answer.
#include "server/service.h"

#include "server/errors.h"
#include "server/generation.h"

namespace tessera::server {

using nlohmann::json;

namespace {

// A path segment with its %XX escapes decoded ("Qwen%2FQwen3-8B" names "Qwen/Qwen3-8B"); a malformed escape stays
// as it is.
std::string percent_decoded(std::string_view s) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(char(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

void Service::handle(HttpRequest&& request, std::shared_ptr<Responder> responder) {
  try {
    route(request, responder);
  } catch (...) {
    send_error(*responder, *metrics_, current_api_error());
  }
}

void Service::answer_preflight(const HttpRequest& req, Responder& responder) {
  const std::string_view origin = req.header("Origin");
  if (!options_.origins.cors(origin)) {
    gateway_.check_origin(req);  // a listed origin passes; anything else is a 403 naming it
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
  gateway_.check_host(req);
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
    send_json(*responder, *metrics_, 200, {{"status", "ok"}});
  } else if (path == "/ready") {
    method_check(get);
    send_ready(*responder);
  } else if (path == "/metrics") {
    method_check(get);
    gateway_.authenticate(req, !options_.metrics_public);
    send_metrics(*responder);
  } else if (path == "/v1/models") {
    method_check(get);
    gateway_.authenticate(req, true);
    send_models(*responder);
  } else if (path.starts_with("/v1/models/")) {
    method_check(get);
    gateway_.authenticate(req, true);
    send_model(*responder, percent_decoded(path.substr(std::string_view("/v1/models/").size())));
  } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
    method_check(post);
    gateway_.check_origin(req);
    Client client = gateway_.authenticate(req, true);
    handle_generation(path == "/v1/completions" ? Endpoint::Completions : Endpoint::ChatCompletions, req, responder,
                      std::move(client));
  } else if (path == "/tokenize" || path == "/detokenize") {
    method_check(post);
    gateway_.check_origin(req);
    const Client client = gateway_.authenticate(req, true);
    handle_tokenization(path == "/detokenize", req, responder, client);
  } else {
    throw ApiException(ErrorCode::NotFound, "no route for " + req.method + " " + std::string(path));
  }
}

void Service::send_ready(Responder& responder) {
  const Lifecycle& l = *lifecycle_;
  const bool ok = l.ready() && !l.draining();
  json body = {{"ready", ok}, {"primary", l.primary_ok() ? "ok" : "failed"}, {"draining", l.draining()}};
  if (l.fallback_health()) body["fallback"] = l.fallback_health()->ok() ? "ok" : "failed";
  send_json(responder, *metrics_, ok ? 200 : 503, body);
}

json Service::model_object() const {
  return {{"id", options_.model_name}, {"object", "model"}, {"created", started_unix_}, {"owned_by", "tessera"},
          {"max_model_len", n_ctx_}};
}

void Service::send_models(Responder& responder) {
  send_json(responder, *metrics_, 200, {{"object", "list"}, {"data", json::array({model_object()})}});
}

void Service::send_model(Responder& responder, const std::string& id) {
  if (id != options_.model_name)
    throw ApiException(ErrorCode::ModelNotFound, "the model '" + id + "' does not exist", "model");
  send_json(responder, *metrics_, 200, model_object());
}

void Service::send_metrics(Responder& responder) {
  EngineStats s = lifecycle_->primary().stats();
  if (Engine* fallback = lifecycle_->fallback()) {
    const EngineStats f = fallback->stats();
    s.n_waiting += f.n_waiting;
    s.n_running += f.n_running;
  }
  metrics_->update_engine(s);
  responder.send(200, "text/plain; version=0.0.4; charset=utf-8", metrics_->serialize());
}

}  // namespace tessera::server
