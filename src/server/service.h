// The OpenAI-compatible service, put together from its rooms: the routes (routes.cpp: HTTP <-> API types), the
// gateway (gateway.h: Host and Origin, auth and the key's allowance, rate limits, queue bound, result cache),
// request preparation on worker threads (request_prep.h), serving (generation.h: one request's life) and the
// lifecycle (lifecycle.h: warm-up, readiness, the engines behind it, a primary and an optional fallback replica,
// and the drain). A request's path through them is in service.cpp. The io thread does only what is cheap and
// stateful; parsing, the chat template and tokenizing run on a few worker threads (RequestWorkers), after the
// request-count limit. Engine events are posted back to the io thread.
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
#include "server/chat_template.h"
#include "server/errors.h"
#include "server/gateway.h"
#include "server/http_server.h"
#include "server/lifecycle.h"
#include "server/metrics.h"
#include "server/openai_json.h"
#include "server/request_prep.h"
#include "server/request_workers.h"
#include "server/service_options.h"
#include "server/structured_output.h"
#include "server/tokenization.h"

namespace tessera::server {

class Service {
 public:
  // `fallback` may be null. Both engines must serve models with the same tokenizer.
  Service(boost::asio::io_context& ioc, std::shared_ptr<Engine> primary, std::shared_ptr<Engine> fallback,
          ServiceOptions options);
  ~Service();

  // The HTTP handler (io thread).
  void handle(HttpRequest&& request, std::shared_ptr<Responder> responder);

  // The lifecycle's warm-up and readiness (see lifecycle.h).
  bool warm_up() { return lifecycle_->warm_up(); }
  void mark_warmed_up() { lifecycle_->mark_warmed_up(); }
  bool ready() const { return lifecycle_->ready(); }
  // Drain: new requests get 503; in-flight ones go on. cancel_all() ends what is left (drain timeout).
  void begin_drain() { lifecycle_->begin_drain(); }
  void cancel_all() { lifecycle_->cancel_all(); }
  int64_t n_in_flight() const { return lifecycle_->n_in_flight(); }
  Lifecycle& lifecycle() { return *lifecycle_; }

  Metrics& metrics() { return *metrics_; }
  bool has_chat_template() const { return chat_template_.has_template(); }

 private:
  // routes.cpp
  void route(HttpRequest& request, const std::shared_ptr<Responder>& responder);
  void answer_preflight(const HttpRequest& request, Responder& responder);
  void send_ready(Responder& responder);
  nlohmann::json model_object() const;  // the served model as /v1/models lists it
  void send_models(Responder& responder);
  void send_model(Responder& responder, const std::string& id);  // GET /v1/models/{id}: it, or a 404
  void send_metrics(Responder& responder);
  // service.cpp: a generation request's way in. The gateway's stateless checks and the request-count limit,
  // then the CPU work on a worker thread; admit() continues on the io thread with the gateway's stateful steps
  // (tokens, result cache, queue) and hands the request to serving.
  void handle_generation(Endpoint endpoint, HttpRequest& request, const std::shared_ptr<Responder>& responder,
                         Client client);
  void admit(Endpoint endpoint, const std::shared_ptr<Responder>& responder, PreparedRequest prepared,
             const Client& client, Clock::time_point arrival);
  ResponseHeader new_response_header(Endpoint endpoint);
  // /tokenize and /detokenize: the request-count limit, then the work on a worker thread and the answer back on
  // the io thread. No engine is involved, so they answer while warming up or draining too.
  void handle_tokenization(bool detokenize, HttpRequest& request, const std::shared_ptr<Responder>& responder,
                           const Client& client);

  boost::asio::io_context& ioc_;
  ServiceOptions options_;
  int64_t n_ctx_ = 0;
  std::unique_ptr<Metrics> metrics_;
  Gateway gateway_;
  ChatTemplate chat_template_;
  SpecialTokenEncoder encoder_;
  StructuredOutput structured_;  // compiled grammars of response formats and tool sets, by source
  RequestPreparer preparer_;
  Tokenization tokenization_;
  uint64_t next_id_ = 0;
  int64_t started_unix_ = 0;
  // Last: their threads call back into the members above, so they stop first.
  std::unique_ptr<Lifecycle> lifecycle_;
  RequestWorkers workers_;
  // One thread that builds large complete response bodies (send_built_json), apart from the request workers: a
  // body of seconds must not hold up the parsing of new requests.
  RequestWorkers body_builder_;
};

}  // namespace tessera::server
