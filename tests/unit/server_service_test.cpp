// The Service behind the HTTP layer, driven with in-memory requests on the embedded model: tenants' caches kept
// apart, the key's priority allowance, /metrics behind a key, Host and Origin checks, the io thread never doing
// a request's CPU work, the queue bound as a reservation, oversized complete responses refused up front, engine
// errors mapped to their statuses, and a throw while handling a request ending only that request.
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/model.h"
#include "server/generation.h"
#include "server/service.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class FakeResponder : public Responder {
 public:
  void add_response_header(std::string name, std::string value) override {
    headers.emplace_back(std::move(name), std::move(value));
  }
  void send(int s, std::string_view, std::string b, const Headers& extra) override {
    status = s;
    body = std::move(b);
    headers.insert(headers.end(), extra.begin(), extra.end());
    done = true;
  }
  void start_stream(int s, std::string_view, const Headers& extra) override {
    status = s;
    headers.insert(headers.end(), extra.begin(), extra.end());
  }
  void write(std::string_view data) override {
    if (throw_on_write-- == 0) throw std::runtime_error("a bug while writing");
    body.append(data);
  }
  void end_stream() override { done = true; }
  bool open() const override { return !aborted; }
  void on_close(std::function<void()> cb) override { close_cb = std::move(cb); }
  void abort() override { aborted = done = true; }

  std::string header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return {};
  }
  json body_json() const { return json::parse(body); }
  // A stream's events, [DONE] left out.
  std::vector<json> sse_json() const {
    std::vector<json> events;
    for (size_t at = body.find("data: "); at != std::string::npos; at = body.find("data: ", at + 1)) {
      const size_t end = body.find("\n\n", at);
      const std::string data = body.substr(at + 6, end - at - 6);
      if (data != "[DONE]") events.push_back(json::parse(data));
    }
    return events;
  }
  std::string error_code() const { return body_json()["error"]["code"].get<std::string>(); }

  int status = 0;
  std::string body;
  Headers headers;
  bool done = false, aborted = false;
  int throw_on_write = -1;  // the write (0 = the first) that throws
  std::function<void()> close_cb;
};

EngineOptions small_engine() {
  EngineOptions o;
  o.threads = 1;
  o.kv_blocks = 256;
  o.scheduling.max_seqs = 16;
  return o;
}

std::shared_ptr<const Model> model() {
  static std::shared_ptr<const Model> m = Model::load_embedded();
  return m;
}

ApiKey key(const std::string& secret, const std::string& name, int32_t priority_min = 0) {
  return ApiKey{secret, name, priority_min, {}, {}, {}};
}

// A Service on the embedded model, warmed up, with the io_context run by the test thread while it waits.
class Harness {
 public:
  // `warm_up`: probe the engine first, as `tessera serve` does; otherwise mark it warm (requests get 503 until one).
  explicit Harness(ServiceOptions o = {}, EngineOptions e = small_engine(), bool warm_up = true) {
    o.model_name = "stories260K";
    engine = std::make_shared<Engine>(model(), e);
    service = std::make_unique<Service>(ioc, engine, nullptr, std::move(o));
    if (warm_up) {
      EXPECT_TRUE(service->warm_up());
    } else {
      service->mark_warmed_up();
    }
  }
  ~Harness() {
    service->cancel_all();
    run_until([&] { return service->n_in_flight() == 0; });
  }

  std::shared_ptr<FakeResponder> start(const std::string& method, const std::string& path, const std::string& body,
                                       Headers headers = {}) {
    HttpRequest r;
    r.method = method;
    r.target = path;
    r.body = body;
    r.headers = std::move(headers);
    r.remote = "127.0.0.1";
    auto resp = std::make_shared<FakeResponder>();
    service->handle(std::move(r), resp);
    return resp;
  }
  std::shared_ptr<FakeResponder> call(const std::string& method, const std::string& path, const json& body = nullptr,
                                      Headers headers = {}) {
    auto resp = start(method, path, body.is_null() ? "" : body.dump(), std::move(headers));
    EXPECT_TRUE(run_until([&] { return resp->done; })) << method << " " << path;
    return resp;
  }
  std::shared_ptr<FakeResponder> complete(const json& body, Headers headers = {}) {
    return call("POST", "/v1/completions", body, std::move(headers));
  }
  template <typename Pred>
  bool run_until(Pred done, std::chrono::seconds limit = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      ioc.run_for(2ms);
    }
    return true;
  }

  boost::asio::io_context ioc;
  // Keeps run_for() waiting for work rather than stopping the context when it runs out (posts come from the
  // worker and engine threads).
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard = boost::asio::make_work_guard(ioc);
  std::shared_ptr<Engine> engine;
  std::unique_ptr<Service> service;
};

// Without the result cache: every request reaches the engine.
ServiceOptions uncached() {
  ServiceOptions o;
  o.result_cache_bytes = 0;
  return o;
}

Headers bearer(const std::string& secret) { return {{"Authorization", "Bearer " + secret}}; }

const json kGreedy = {{"prompt", "Once upon a time"}, {"max_tokens", 8}, {"temperature", 0}};

TEST(ServiceTenancy, ResultCacheHitsOnlyTheSameTenantAndSalt) {
  ServiceOptions o;
  o.api_keys = {key("sk-a", "alice"), key("sk-a2", "alice"), key("sk-b", "bob")};
  Harness h(o);
  EXPECT_EQ(h.complete(kGreedy, bearer("sk-a"))->header("X-Tessera-Cache"), "");
  EXPECT_EQ(h.complete(kGreedy, bearer("sk-a"))->header("X-Tessera-Cache"), "hit");
  EXPECT_EQ(h.complete(kGreedy, bearer("sk-a2"))->header("X-Tessera-Cache"), "hit");  // alice's other key
  const auto bob = h.complete(kGreedy, bearer("sk-b"));
  EXPECT_EQ(bob->status, 200);
  EXPECT_EQ(bob->header("X-Tessera-Cache"), "") << "bob must not learn what alice asked";
  json salted = kGreedy;
  salted["cache_salt"] = "private";
  EXPECT_EQ(h.complete(salted, bearer("sk-a"))->header("X-Tessera-Cache"), "");
  EXPECT_EQ(h.complete(salted, bearer("sk-a"))->header("X-Tessera-Cache"), "hit");
  salted["cache_salt"] = std::string(2000, 's');
  EXPECT_EQ(h.complete(salted, bearer("sk-a"))->status, 400);
}

// Regression: a result-cache hit refunded its whole token charge, so a client could fetch one large cached answer
// without end past its tokens-per-minute budget. A hit now spends the tokens its answer holds.
TEST(ServiceTenancy, CacheHitsSpendTheTokensTheyHold) {
  ServiceOptions o;
  o.rate_limits.tokens_per_minute = 100;
  Harness h(o);
  const auto first = h.complete(kGreedy);
  ASSERT_EQ(first->status, 200);
  const int64_t used = first->body_json()["usage"]["total_tokens"].get<int64_t>();
  ASSERT_GT(used, 0);
  int served = 1, refused = 0;
  for (int i = 0; i < 20; ++i) {
    const auto r = h.complete(kGreedy);
    if (r->status == 200) {
      EXPECT_EQ(r->header("X-Tessera-Cache"), "hit");
      ++served;
    } else {
      EXPECT_EQ(r->status, 429);
      ++refused;
    }
  }
  EXPECT_GT(refused, 0) << "hits were free";
  EXPECT_LE(served, 100 / used + 1);  // what the budget holds (plus the trickle refilled meanwhile)
}

std::string long_prompt() {
  std::string p;
  for (int i = 0; i < 6; ++i) p += "Lily and Ben went to the park to play with a big red ball. ";
  return p;
}

int64_t cached_tokens(const FakeResponder& r) {
  const json usage = r.body_json()["usage"];
  return usage.contains("prompt_tokens_details") ? usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>() : 0;
}

// The prefix-cache prompt leak: cached_tokens told a tenant how much of its prompt another had sent. Tenants
// share no blocks unless --shared-prefix-cache.
TEST(ServiceTenancy, PrefixCacheIsPerTenantUnlessShared) {
  for (const bool shared : {false, true}) {
    ServiceOptions o;
    o.api_keys = {key("sk-a", "alice"), key("sk-b", "bob")};
    o.result_cache_bytes = 0;
    o.shared_prefix_cache = shared;
    Harness h(o);
    json first = {{"prompt", long_prompt() + "Then"}, {"max_tokens", 2}, {"temperature", 0}};
    ASSERT_EQ(h.complete(first, bearer("sk-a"))->status, 200);
    json probe = {{"prompt", long_prompt() + "Then the dog"}, {"max_tokens", 2}, {"temperature", 0}};
    const auto bob = h.complete(probe, bearer("sk-b"));
    ASSERT_EQ(bob->status, 200);
    if (shared) EXPECT_GT(cached_tokens(*bob), 0);
    else EXPECT_EQ(cached_tokens(*bob), 0) << "bob's usage reveals alice's prompt";
    probe["prompt"] = long_prompt() + "Then a cat";
    EXPECT_GT(cached_tokens(*h.complete(probe, bearer("sk-a"))), 0);  // alice's own prefix is reused
    probe["cache_salt"] = "fresh";
    EXPECT_EQ(cached_tokens(*h.complete(probe, bearer("sk-a"))), 0);
  }
}

TEST(ServiceKeys, PriorityBeyondTheKeysAllowanceIs403) {
  ServiceOptions o;
  o.api_keys = {key("sk-plain", "plain"), key("sk-vip", "vip", -100)};
  Harness h(o);
  json urgent = kGreedy;
  urgent["priority"] = -5;
  const auto refused = h.complete(urgent, bearer("sk-plain"));
  EXPECT_EQ(refused->status, 403);
  EXPECT_EQ(refused->error_code(), "permission_denied");
  EXPECT_EQ(refused->body_json()["error"]["param"], "priority");
  Headers header = bearer("sk-plain");
  header.emplace_back("X-Priority", "-1");
  EXPECT_EQ(h.complete(kGreedy, header)->status, 403);
  urgent["priority"] = 3;
  EXPECT_EQ(h.complete(urgent, bearer("sk-plain"))->status, 200);
  urgent["priority"] = -5;
  EXPECT_EQ(h.complete(urgent, bearer("sk-vip"))->status, 200);
  urgent["priority"] = -101;
  EXPECT_EQ(h.complete(urgent, bearer("sk-vip"))->status, 403);
  Harness open;  // without keys, priority stays as it was
  urgent["priority"] = -1000000;
  EXPECT_EQ(open.complete(urgent)->status, 200);
}

TEST(ServiceKeys, MetricsNeedAKeyUnlessPublic) {
  ServiceOptions o;
  o.api_keys = {key("sk-a", "alice")};
  Harness h(o);
  EXPECT_EQ(h.call("GET", "/metrics")->status, 401);
  EXPECT_EQ(h.call("GET", "/metrics", nullptr, bearer("sk-a"))->status, 200);
  EXPECT_EQ(h.call("GET", "/health")->status, 200);
  EXPECT_EQ(h.call("GET", "/ready")->status, 200);
  // OpenAI's models.retrieve: the served model, or a 404; a key as for the list.
  EXPECT_EQ(h.call("GET", "/v1/models/stories260K")->status, 401);
  const auto one = h.call("GET", "/v1/models/stories260K", nullptr, bearer("sk-a"));
  ASSERT_EQ(one->status, 200) << one->body;
  EXPECT_EQ(one->body_json()["id"], "stories260K");
  EXPECT_EQ(one->body_json()["object"], "model");
  EXPECT_EQ(h.call("GET", "/v1/models/stories%32%360K", nullptr, bearer("sk-a"))->status, 200) << "%XX decoded";
  for (const std::string other : {"/v1/models/gpt-4", "/v1/models/", "/v1/models/stories260K%", "/v1/models/%zz"}) {
    const auto missing = h.call("GET", other, nullptr, bearer("sk-a"));
    EXPECT_EQ(missing->status, 404) << other;
    EXPECT_EQ(missing->error_code(), "model_not_found") << other;
  }
  EXPECT_EQ(h.call("POST", "/v1/models/stories260K", json::object(), bearer("sk-a"))->status, 405);
  o.metrics_public = true;
  Harness pub(o);
  EXPECT_EQ(pub.call("GET", "/metrics")->status, 200);
  EXPECT_EQ(pub.call("GET", "/v1/models")->status, 401);
}

TEST(ServiceOrigins, HostAndBrowserOriginChecks) {
  ServiceOptions o;
  o.origins = OriginPolicy("127.0.0.1", {}, {"https://app.example"});
  Harness h(o);
  for (const char* host : {"127.0.0.1:8080", "localhost", "LOCALHOST:1", "[::1]:8080", "127.0.0.2"})
    EXPECT_EQ(h.call("GET", "/health", nullptr, {{"Host", host}})->status, 200) << host;
  const auto rebound = h.complete(kGreedy, {{"Host", "evil.example:8080"}});
  EXPECT_EQ(rebound->status, 403);
  EXPECT_EQ(rebound->error_code(), "permission_denied");
  EXPECT_EQ(h.call("GET", "/v1/models", nullptr, {{"Host", "evil.example"}})->status, 403);
  const auto csrf = h.complete(kGreedy, {{"Origin", "https://evil.example"}});
  EXPECT_EQ(csrf->status, 403);
  EXPECT_EQ(h.complete(kGreedy, {{"Origin", "null"}})->status, 403);
  const auto app = h.complete(kGreedy, {{"Origin", "https://app.example"}});
  EXPECT_EQ(app->status, 200);
  EXPECT_EQ(app->header("Access-Control-Allow-Origin"), "https://app.example");
  const auto preflight = h.call("OPTIONS", "/v1/completions", nullptr, {{"Origin", "https://app.example"}});
  EXPECT_EQ(preflight->status, 204);
  EXPECT_NE(preflight->header("Access-Control-Allow-Headers").find("Authorization"), std::string::npos);
  EXPECT_EQ(h.call("OPTIONS", "/v1/completions", nullptr, {{"Origin", "https://evil.example"}})->status, 403);
  Harness defaults;  // no --cors-origins: no browser origin may POST; GET is not checked
  EXPECT_EQ(defaults.complete(kGreedy, {{"Origin", "http://localhost:3000"}})->status, 403);
  EXPECT_EQ(defaults.call("GET", "/health", nullptr, {{"Origin", "http://localhost:3000"}})->status, 200);
}

// Regression: parsing, the chat template and tokenizing ran in the handler, on the io thread: a megabyte of '<'
// held every stream, /health and /metrics for the whole of it. The handler now returns at once.
TEST(ServiceIoThread, TheHandlerLeavesTheRequestsCpuWorkToTheWorkers) {
  Harness h;
  const json flood = {{"messages", {{{"role", "user"}, {"content", std::string(1 << 20, '<')}}}}, {"max_tokens", 4}};
  const std::string body = flood.dump();
  double slowest = 0.0;
  std::vector<std::shared_ptr<FakeResponder>> responses;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    responses.push_back(h.start("POST", "/v1/chat/completions", body));
    slowest = std::max(slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto health = h.call("GET", "/health");
  const double health_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(health_s, 0.1) << "/health waited for the floods";
  EXPECT_LT(slowest, 0.02) << "the handler did the request's work itself";
  for (auto& r : responses) {
    ASSERT_TRUE(h.run_until([&] { return r->done; }));
    EXPECT_EQ(r->status, 400);
    EXPECT_EQ(r->error_code(), "context_length_exceeded");
  }
}

// A complete response with logprob lists can take seconds to build and serialize: it is built on the body
// builder's thread and sent from the io thread (here the test thread), and it stays in flight until then. A small
// one is built in place; with the builder's queue full, a large one is too (a finished generation is never
// refused).
TEST(ServiceIoThread, LargeResponseBodiesAreBuiltOffTheIoThread) {
  boost::asio::io_context ioc;
  auto guard = boost::asio::make_work_guard(ioc);
  auto engine = std::make_shared<Engine>(model(), small_engine());
  ServiceOptions options;
  Metrics metrics("stories260K");
  Gateway gateway(options, metrics);
  Lifecycle lifecycle(engine, nullptr, 1000ms, metrics);
  const ToolCallFormat tools;
  RequestWorkers builder(1, 4), full(1, 0);
  const auto io_thread = std::this_thread::get_id();
  auto send = [&](RequestWorkers& pool, bool large, bool fail = false) {
    const ServingContext ctx{ioc, metrics, gateway, lifecycle, model()->tokenizer(), tools, pool};
    auto responder = std::make_shared<FakeResponder>();
    std::thread::id built_on;
    send_built_json(ctx, responder, large, [&built_on, fail]() -> json {
      built_on = std::this_thread::get_id();
      if (fail) throw std::runtime_error("a bug while building");
      return {{"object", "text_completion"}};
    });
    EXPECT_FALSE(responder->done) << "sent before the io thread ran";
    EXPECT_EQ(lifecycle.n_in_flight(), large ? 1 : 0);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!responder->done && std::chrono::steady_clock::now() < deadline) ioc.run_for(2ms);
    EXPECT_TRUE(responder->done);
    EXPECT_EQ(lifecycle.n_in_flight(), 0);
    return std::pair{responder, built_on};
  };
  const auto [large, large_thread] = send(builder, true);
  EXPECT_EQ(large->status, 200);
  EXPECT_EQ(large->body_json()["object"], "text_completion");
  EXPECT_NE(large_thread, io_thread);
  const auto [inline_, inline_thread] = send(full, true);
  EXPECT_EQ(inline_->status, 200);
  EXPECT_EQ(inline_thread, io_thread);
  const auto [failed, failed_thread] = send(builder, true, true);
  EXPECT_EQ(failed->status, 500);
  EXPECT_NE(failed_thread, io_thread);

  const ServingContext ctx{ioc, metrics, gateway, lifecycle, model()->tokenizer(), tools, builder};
  auto small = std::make_shared<FakeResponder>();
  std::thread::id small_thread;
  send_built_json(ctx, small, false, [&small_thread]() -> json {
    small_thread = std::this_thread::get_id();
    return {{"object", "text_completion"}};
  });
  EXPECT_TRUE(small->done);
  EXPECT_EQ(small_thread, io_thread);

  ApiRequest request;
  std::vector<ChoiceResult> choices(2);
  choices[0].text = std::string(1000, 'a');
  EXPECT_FALSE(large_body(request, choices));
  choices[1].text = std::string(1 << 20, 'b');
  EXPECT_TRUE(large_body(request, choices));
  choices[1].text.clear();
  request.logprobs = true;
  EXPECT_TRUE(large_body(request, choices));
  request.logprobs = false;
  request.prompt_logprobs = 0;
  EXPECT_TRUE(large_body(request, choices));
}

// A cached answer with logprobs (a large body, built off the io thread) comes back as the generation sent it.
TEST(ServiceIoThread, ACachedAnswerWithLogprobsReplaysWhole) {
  Harness h;
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}, {"logprobs", 3},
                     {"echo", true}};
  const auto first = h.complete(body);
  ASSERT_EQ(first->status, 200) << first->body;
  EXPECT_EQ(first->header("X-Tessera-Cache"), "");
  const auto again = h.complete(body);
  ASSERT_EQ(again->status, 200) << again->body;
  EXPECT_EQ(again->header("X-Tessera-Cache"), "hit");
  EXPECT_EQ(again->body_json()["choices"], first->body_json()["choices"]);
  EXPECT_EQ(again->body_json()["usage"], first->body_json()["usage"]);
  EXPECT_FALSE(first->body_json()["choices"][0]["logprobs"]["top_logprobs"].empty());
  EXPECT_EQ(h.service->n_in_flight(), 0);
}

// Regression: --max-queue compared against a count the engine publishes once per step, so a burst was admitted
// whole. Admission now reserves a slot: exactly the overflow is refused.
TEST(ServiceQueue, ABurstGetsExactlyTheOverflowAs429) {
  ServiceOptions o;
  o.max_queue = 8;
  o.result_cache_bytes = 0;
  EngineOptions e = small_engine();
  // The batch waits for 1000 requests or 30 s: nothing starts meanwhile.
  e.scheduling.policy = SchedulingPolicy::Window;
  e.scheduling.batch_size = 1000;
  e.scheduling.max_wait_ms = 30000;
  Harness h(o, e, /*warm_up=*/false);  // its probe would wait for the window too
  std::vector<std::shared_ptr<FakeResponder>> burst;
  for (int i = 0; i < 200; ++i) burst.push_back(h.start("POST", "/v1/completions", kGreedy.dump()));
  auto n_refused = [&] {
    return std::count_if(burst.begin(), burst.end(), [](const auto& r) { return r->done && r->status == 429; });
  };
  ASSERT_TRUE(h.run_until([&] { return n_refused() == 192; }));
  h.run_until([] { return false; }, 1s);  // nothing more is refused, nothing more completes
  EXPECT_EQ(n_refused(), 192);
  for (const auto& r : burst) {
    if (r->done) {
      EXPECT_EQ(r->error_code(), "queue_full");
    }
  }
  EXPECT_EQ(h.service->n_in_flight(), 8);
  json two = kGreedy;
  two["n"] = 2;
  EXPECT_EQ(h.complete(two)->status, 429);  // n choices take n slots
}

// A complete response is built in memory and sent at once: one that could pass --max-response-bytes is refused
// up front with a 400 naming the limit, and streaming the same request is fine.
TEST(ServiceLimits, AnOversizedCompleteResponseIsRefusedUpFront) {
  ServiceOptions o;
  o.max_response_bytes = 200000;
  Harness h(o);
  const json big = {{"prompt", "Once"}, {"max_tokens", 200}, {"n", 4}, {"logprobs", 5}, {"temperature", 0}};
  const auto refused = h.complete(big);
  EXPECT_EQ(refused->status, 400);
  const std::string message = refused->body_json()["error"]["message"];
  EXPECT_NE(message.find("limit of 200000 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("n = 4 x (max_tokens = 200"), std::string::npos) << message;
  json stream = big;
  stream["stream"] = true;
  const auto streamed = h.complete(stream);
  EXPECT_EQ(streamed->status, 200);
  EXPECT_NE(streamed->body.find("data: [DONE]"), std::string::npos);
  json small = big;
  small["max_tokens"] = 10;
  EXPECT_EQ(h.complete(small)->status, 200);
}

// Every engine error was a 400, "the engine is shutting down" included: that one is a 503.
TEST(ServiceErrors, AStoppedEngineIs503) {
  Harness h;
  h.engine->stop();
  const auto r = h.complete(kGreedy);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->error_code(), "service_unavailable");
  EXPECT_FALSE(r->header("Retry-After").empty());
}

// A throw while handling a request's events (a bug) ends that request with an error, never the io thread; the
// next request is served.
TEST(ServiceErrors, AThrowWhileStreamingEndsOnlyThatRequest) {
  Harness h;
  json stream = kGreedy;
  stream["stream"] = true;
  auto r = h.start("POST", "/v1/completions", stream.dump());
  r->throw_on_write = 1;  // the second chunk
  ASSERT_NO_THROW(ASSERT_TRUE(h.run_until([&] { return r->done; })));
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("\"code\":\"internal_error\""), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos);
  EXPECT_TRUE(h.run_until([&] { return h.service->n_in_flight() == 0; }));
  EXPECT_EQ(h.complete(kGreedy)->status, 200);
}

}  // namespace
}  // namespace tessera::server

namespace tessera::server {
namespace {

TEST(ServiceValidation, TheEnginesRefusalsMapToTheirCodesAndFields) {
  // The engine's check_request decides; the server names the code and the field.
  Harness h;
  auto token = h.complete({{"prompt", {1, 1 << 20}}, {"max_tokens", 4}});
  EXPECT_EQ(token->status, 400);
  EXPECT_EQ(token->body_json()["error"]["param"], "prompt");
  EXPECT_NE(token->body.find("out of range"), std::string::npos) << token->body;
  auto context = h.complete({{"prompt", "Once upon a time"}, {"max_tokens", 1 << 19}});
  EXPECT_EQ(context->status, 400);
  EXPECT_EQ(context->error_code(), "context_length_exceeded");
  EXPECT_EQ(context->body_json()["error"]["param"], "max_tokens");
  auto bias = h.complete({{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"logit_bias", {{"999999", -100}}}});
  EXPECT_EQ(bias->status, 400);
  EXPECT_EQ(bias->body_json()["error"]["param"], "logit_bias");
  EXPECT_NE(bias->body.find("out of range"), std::string::npos) << bias->body;
  auto stop_id = h.complete({{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"stop_token_ids", {1 << 30}}});
  EXPECT_EQ(stop_id->status, 400);
  EXPECT_EQ(stop_id->body_json()["error"]["param"], "stop_token_ids");
  // min_tokens beyond max_tokens (given, or the completions default of 16) is a 400 naming both.
  for (const json& body : {json({{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"min_tokens", 5}}),
                           json({{"prompt", "Once upon a time"}, {"min_tokens", 17}})}) {
    auto min_tokens = h.complete(body);
    EXPECT_EQ(min_tokens->status, 400) << body.dump();
    EXPECT_EQ(min_tokens->body_json()["error"]["param"], "min_tokens") << min_tokens->body;
  }
  auto fine = h.complete({{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"min_tokens", 6},
                          {"logit_bias", {{"1", 5}}}, {"stop_token_ids", {2}}});
  ASSERT_EQ(fine->status, 200) << fine->body;
  EXPECT_EQ(fine->body_json()["usage"]["completion_tokens"], 6);
}

TEST(ServiceChoices, NChoicesForkOnePromptAndEqualSeparateRequests) {
  // n = 3 seeded choices are one engine request: the prompt is computed once and forked (copy-on-write), and
  // choice k is what a lone request with seed + k gives. Greedy choices are all the one greedy text.
  Harness h(uncached());
  const std::string prompt = "Once upon a time there was a little dog named Max who";
  ASSERT_TRUE(h.engine->wait_idle(10s));  // the warm-up's last step counted
  const uint64_t before = h.engine->stats().n_computed_tokens;
  auto r = h.complete({{"prompt", prompt}, {"max_tokens", 12}, {"n", 3}, {"temperature", 0.9}, {"seed", 5}});
  ASSERT_EQ(r->status, 200) << r->body;
  const json choices = r->body_json()["choices"];
  ASSERT_EQ(choices.size(), 3u);
  const int64_t n_prompt = r->body_json()["usage"]["prompt_tokens"].get<int64_t>();
  const int64_t n_completion = r->body_json()["usage"]["completion_tokens"].get<int64_t>();
  ASSERT_TRUE(h.engine->wait_idle(10s));
  EXPECT_LE(int64_t(h.engine->stats().n_computed_tokens - before), n_prompt + n_completion)
      << "the prompt was computed once for the three choices";
  for (int k = 0; k < 3; ++k) {
    auto alone = h.complete({{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0.9}, {"seed", 5 + k}});
    ASSERT_EQ(alone->status, 200) << alone->body;
    EXPECT_EQ(choices[size_t(k)]["text"], alone->body_json()["choices"][0]["text"]) << "choice " << k;
  }
  auto greedy = h.complete({{"prompt", prompt}, {"max_tokens", 12}, {"n", 3}, {"temperature", 0}});
  auto one = h.complete({{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}});
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(greedy->body_json()["choices"][size_t(k)]["text"], one->body_json()["choices"][0]["text"]);
}

}  // namespace
}  // namespace tessera::server

namespace tessera::server {
namespace {

EngineOptions speculating_engine() {
  EngineOptions e = small_engine();
  e.speculative.method = SpecMethod::Ngram;
  e.speculative.switch_policy = SpecSwitch::Always;
  return e;
}

TEST(ServiceSpeculative, TheFieldIsABooleanAndTheOutputDoesNotDependOnIt) {
  ServiceOptions o;
  o.result_cache_bytes = 0;
  Harness h(o, speculating_engine());
  auto bad = h.complete({{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"speculative", "yes"}});
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->body_json()["error"]["type"], "invalid_request_error");
  EXPECT_EQ(bad->body_json()["error"]["param"], "speculative");
  EXPECT_NE(bad->body.find("must be a boolean"), std::string::npos) << bad->body;
  // The prompt repeats itself, so prompt lookup has a guess from the first step.
  const json on = {{"prompt", "Once upon a time, there was a little girl named Lily. Once upon a time"},
                   {"max_tokens", 40},
                   {"temperature", 0}};
  json off = on;
  off["speculative"] = false;
  auto a = h.complete(on);
  auto b = h.complete(off);
  ASSERT_EQ(a->status, 200) << a->body;
  ASSERT_EQ(b->status, 200) << b->body;
  EXPECT_EQ(a->body_json()["choices"][0]["text"], b->body_json()["choices"][0]["text"]);
  // The spec_decode counters under the project's prefix, moved by the speculating request.
  const auto metrics = h.call("GET", "/metrics");
  EXPECT_NE(metrics->body.find("tessera_spec_decode_num_drafts_total{"), std::string::npos);
  EXPECT_NE(metrics->body.find("tessera_spec_decode_num_accepted_tokens_per_pos_total{"), std::string::npos);
  EXPECT_NE(metrics->body.find("tessera_spec_decode_draft_acceptance_rate{"), std::string::npos);
  EXPECT_EQ(metrics->body.find("tessera_spec_decode_num_drafts_total{model_name=\"stories260K\"} 0\n"), std::string::npos)
      << "no verification was counted";
}

}  // namespace
}  // namespace tessera::server

namespace tessera::server {
namespace {

json post(Harness& h, const std::string& path, const json& body, int want_status = 200) {
  auto r = h.call("POST", path, body);
  EXPECT_EQ(r->status, want_status) << path << " " << body.dump() << ": " << r->body;
  return r->body_json();
}

// vLLM's /tokenize and /detokenize: the same ids a generation's prompt has, and back.
TEST(ServiceTokenization, TokenizeGivesThePromptGenerationSees) {
  Harness h(uncached());
  const Tokenizer& tok = model()->tokenizer();
  const json text = post(h, "/tokenize", {{"prompt", "Once upon a time"}});
  EXPECT_EQ(text["tokens"].get<std::vector<int32_t>>(), tok.encode("Once upon a time", true));
  EXPECT_EQ(text["count"], text["tokens"].size());
  EXPECT_EQ(text["max_model_len"], h.engine->limits().n_ctx);
  EXPECT_TRUE(text["token_strs"].is_null());
  auto completion = h.complete(kGreedy);
  ASSERT_EQ(completion->status, 200) << completion->body;
  EXPECT_EQ(completion->body_json()["usage"]["prompt_tokens"], text["count"]);

  const json plain =
      post(h, "/tokenize", {{"prompt", "Once upon a time"}, {"add_special_tokens", false}, {"return_token_strs", true}});
  const auto ids = plain["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids, tok.encode("Once upon a time", false));
  ASSERT_EQ(plain["token_strs"].size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(plain["token_strs"][i], tok.vocab().tokens[size_t(ids[i])]);

  // A chat body counts what /v1/chat/completions would put before the reply.
  const json chat = {{"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}},
                     {"model", "stories260K"}};
  const json chat_tokens = post(h, "/tokenize", chat);
  json generate = chat;
  generate["max_tokens"] = 1;
  const json reply = post(h, "/v1/chat/completions", generate);
  EXPECT_EQ(reply["usage"]["prompt_tokens"], chat_tokens["count"]);
  EXPECT_GT(chat_tokens["count"].get<int>(), text["count"].get<int>());

  EXPECT_EQ(post(h, "/detokenize", {{"tokens", text["tokens"]}})["prompt"], "Once upon a time");
  EXPECT_EQ(post(h, "/detokenize", {{"tokens", json::array()}})["prompt"], "");
}

TEST(ServiceTokenization, BadBodiesAreClearErrors) {
  Harness h;
  const int32_t n_vocab = model()->tokenizer().n_vocab();
  auto param_of = [&](const std::string& path, const std::string& body) {
    auto r = h.start("POST", path, body);
    EXPECT_TRUE(h.run_until([&] { return r->done; }));
    EXPECT_EQ(r->status, 400) << path << " " << body << ": " << r->body;
    return r->body_json()["error"]["param"];
  };
  EXPECT_EQ(param_of("/tokenize", "{}"), "prompt");
  EXPECT_EQ(param_of("/tokenize", R"({"prompt": 5})"), "prompt");
  EXPECT_EQ(param_of("/tokenize", R"({"prompt": ["a"]})"), "prompt");
  EXPECT_EQ(param_of("/tokenize", R"({"prompt": "a", "messages": [{"role": "user", "content": "b"}]})"), "prompt");
  EXPECT_EQ(param_of("/tokenize", R"({"prompt": "a", "add_special_tokens": "yes"})"), "add_special_tokens");
  EXPECT_EQ(param_of("/tokenize", R"({"prompt": "a", "return_token_strs": 1})"), "return_token_strs");
  EXPECT_EQ(param_of("/tokenize", R"({"messages": []})"), "messages");
  EXPECT_EQ(param_of("/tokenize", R"({"prompt": "a", "model": 7})"), "model");
  EXPECT_EQ(param_of("/detokenize", "{}"), "tokens");
  EXPECT_EQ(param_of("/detokenize", R"({"tokens": "1 2"})"), "tokens");
  EXPECT_EQ(param_of("/detokenize", json({{"tokens", std::vector<int>(size_t(h.engine->limits().n_ctx) + 1, 1)}}).dump()),
            "tokens");
  for (const std::string& bad : {std::string("-1"), std::to_string(n_vocab), std::string("1.5"), std::string("1e300"),
                                 std::string("18446744073709551615"), std::string("9223372036854775808"),
                                 std::string("\"3\""), std::string("null")})
    EXPECT_EQ(param_of("/detokenize", R"({"tokens": [1, )" + bad + "]}"), "tokens") << bad;
  for (const std::string path : {"/tokenize", "/detokenize"}) {
    auto wrong_model = h.call("POST", path, {{"prompt", "a"}, {"tokens", {1}}, {"model", "gpt-4"}});
    EXPECT_EQ(wrong_model->status, 404) << wrong_model->body;
    auto malformed = h.start("POST", path, "{\"prompt\": ");
    EXPECT_TRUE(h.run_until([&] { return malformed->done; }));
    EXPECT_EQ(malformed->status, 400);
    EXPECT_EQ(malformed->error_code(), "invalid_json") << malformed->body;
    EXPECT_EQ(h.call("GET", path)->status, 405);
  }
}

TEST(ServiceTokenization, NeedsAKeyWhereGenerationDoes) {
  ServiceOptions o;
  o.api_keys = {key("sk-a", "alice")};
  Harness h(o);
  EXPECT_EQ(h.call("POST", "/tokenize", {{"prompt", "a"}})->status, 401);
  EXPECT_EQ(h.call("POST", "/detokenize", {{"tokens", {1}}})->status, 401);
  EXPECT_EQ(h.call("POST", "/tokenize", {{"prompt", "a"}}, bearer("sk-a"))->status, 200);
  EXPECT_EQ(h.call("POST", "/detokenize", {{"tokens", {1}}}, bearer("sk-a"))->status, 200);
}


// OpenAI's echo on /v1/completions, as evaluation harnesses use it: the prompt comes back in front of the text,
// and with logprobs each prompt token's log-probability (the first one null), max_tokens 0 allowed.
TEST(ServiceEcho, ThePromptComesBackWithItsLogprobs) {
  Harness h(uncached());
  const std::string prompt = "Once upon a time";
  const json plain = post(h, "/v1/completions",
                          {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 2}});
  const json echo = post(h, "/v1/completions",
                         {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"logprobs", 2}, {"echo", true}});
  const int n_prompt = echo["usage"]["prompt_tokens"];
  EXPECT_EQ(echo["usage"]["completion_tokens"], plain["usage"]["completion_tokens"]);
  const json& got = echo["choices"][0];
  const json& want = plain["choices"][0];
  EXPECT_EQ(got["text"], prompt + want["text"].get<std::string>());
  const json& lp = got["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), size_t(n_prompt) + want["logprobs"]["tokens"].size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (int i = 1; i < n_prompt; ++i) {
    EXPECT_LE(lp["token_logprobs"][size_t(i)].get<double>(), 0.0) << i;
    EXPECT_EQ(lp["top_logprobs"][size_t(i)].size(), 2u) << i;
  }
  // text_offset indexes the returned text: the tokenizer's leading space is not in the echoed prompt.
  EXPECT_EQ(lp["text_offset"][size_t(n_prompt)], prompt.size());
  for (size_t i = 1; i < lp["text_offset"].size(); ++i)
    EXPECT_LE(lp["text_offset"][i - 1].get<int>(), lp["text_offset"][i].get<int>());
  for (size_t i = 0; i < want["logprobs"]["tokens"].size(); ++i) {
    EXPECT_EQ(lp["text_offset"][size_t(n_prompt) + i],
              want["logprobs"]["text_offset"][i].get<size_t>() + prompt.size());
    EXPECT_EQ(lp["tokens"][size_t(n_prompt) + i], want["logprobs"]["tokens"][i]);
    EXPECT_EQ(lp["token_logprobs"][size_t(n_prompt) + i], want["logprobs"]["token_logprobs"][i]);
  }

  // The prompt's logprobs are those the model gives when it generates the same tokens: score the greedy run's
  // own output as a prompt (token ids), max_tokens 0.
  const json ids = post(h, "/tokenize", {{"prompt", prompt + want["text"].get<std::string>()}})["tokens"];
  const json scored = post(h, "/v1/completions", {{"prompt", ids}, {"max_tokens", 0}, {"logprobs", 1}, {"echo", true}});
  EXPECT_EQ(scored["usage"]["completion_tokens"], 0);
  EXPECT_EQ(scored["choices"][0]["finish_reason"], "length");
  const json& slp = scored["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(slp.size(), ids.size());
  if (ids.size() == lp["tokens"].size()) {  // the text tokenizes back to the same ids
    for (size_t i = size_t(n_prompt); i < ids.size(); ++i)
      EXPECT_NEAR(slp[i].get<double>(), lp["token_logprobs"][i].get<double>(), 1e-4) << i;
  }

  // Without logprobs, and streamed: the text alone, the prompt with each choice's first chunk.
  const json bare = post(h, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}});
  EXPECT_EQ(bare["choices"][0]["text"], prompt);
  EXPECT_FALSE(bare["choices"][0].contains("logprobs") && !bare["choices"][0]["logprobs"].is_null());
  auto stream = h.complete({{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"echo", true}, {"n", 2},
                            {"stream", true}});
  ASSERT_EQ(stream->status, 200);
  std::vector<std::string> texts(2);
  for (const json& chunk : stream->sse_json())
    for (const json& c : chunk["choices"]) texts[c["index"].get<size_t>()] += c["text"].get<std::string>();
  for (const std::string& t : texts) EXPECT_EQ(t, got["text"]);

  // A stream writes each choice's echo at once: past what a stream may buffer it is refused up front (the same
  // request without stream is fine).
  std::string long_prompt;
  for (int i = 0; i < 30; ++i) long_prompt += "Once upon a time there was a dog. ";
  json burst = {{"prompt", long_prompt}, {"max_tokens", 1}, {"n", 16}, {"logprobs", 20}, {"echo", true},
                {"temperature", 0}, {"stream", true}};
  auto refused = h.complete(burst);
  EXPECT_EQ(refused->status, 400);
  EXPECT_EQ(refused->body_json()["error"]["param"], "echo") << refused->body;
  burst["stream"] = false;
  EXPECT_EQ(h.complete(burst)->status, 200);

  // max_tokens 0 needs echo; echo is a boolean.
  EXPECT_EQ(h.complete({{"prompt", prompt}, {"max_tokens", 0}})->body_json()["error"]["param"], "max_tokens");
  EXPECT_EQ(h.complete({{"prompt", prompt}, {"echo", "yes"}})->body_json()["error"]["param"], "echo");
}


// vLLM's prompt_logprobs: each prompt token's logprob, rank and top alternatives keyed by token id, per
// completion choice and at the top of a chat response; the same figures echo's logprobs give.
TEST(ServiceEcho, PromptLogprobsInVllmsShape) {
  Harness h(uncached());
  const std::string prompt = "Once upon a time there was";
  const std::vector<int32_t> ids = post(h, "/tokenize", {{"prompt", prompt}})["tokens"];
  const json r = post(h, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 2}, {"temperature", 0}, {"n", 2},
                                             {"prompt_logprobs", 2}, {"echo", true}, {"logprobs", 1}});
  for (const json& choice : r["choices"]) {
    const json& list = choice["prompt_logprobs"];
    ASSERT_EQ(list.size(), ids.size());
    EXPECT_TRUE(list[0].is_null());
    const json& echoed = choice["logprobs"];
    for (size_t i = 1; i < ids.size(); ++i) {
      const json& entry = list[i];
      EXPECT_LE(entry.size(), 3u);
      const json& own = entry.at(std::to_string(ids[i]));
      EXPECT_EQ(own["logprob"], echoed["token_logprobs"][i]) << i;
      EXPECT_GE(own["rank"].get<int>(), 1);
      EXPECT_EQ(own["decoded_token"], echoed["tokens"][i]);
      std::vector<int> ranks;
      for (const auto& [id, e] : entry.items()) ranks.push_back(e["rank"]);
      EXPECT_NE(std::find(ranks.begin(), ranks.end(), 1), ranks.end()) << "the most likely token is listed";
      EXPECT_EQ(echoed["top_logprobs"][i].size(), 1u) << "echo shows top_logprobs (1), not prompt_logprobs (2)";
    }
  }
  const json chat = post(h, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                                     {"max_tokens", 1}, {"prompt_logprobs", 0}});
  ASSERT_EQ(chat["prompt_logprobs"].size(), chat["usage"]["prompt_tokens"].get<size_t>());
  for (size_t i = 1; i < chat["prompt_logprobs"].size(); ++i) EXPECT_EQ(chat["prompt_logprobs"][i].size(), 1u);
  for (const json& bad : {json({{"prompt", prompt}, {"prompt_logprobs", 21}}),
                          json({{"prompt", prompt}, {"prompt_logprobs", 1}, {"stream", true}}),
                          json({{"prompt", prompt}, {"prompt_logprobs", "2"}})})
    EXPECT_EQ(h.complete(bad)->body_json()["error"]["param"], "prompt_logprobs") << bad.dump();
}

// OpenAI's prompt arrays on /v1/completions: each prompt gets n choices (prompt p's i-th at index p·n + i),
// each the text a request of that prompt alone gives; usage adds up the prompts.
TEST(ServiceBatch, EachPromptGetsTheChoicesItWouldGetAlone) {
  Harness h(uncached());
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Lily and Tom"};
  const json common = {{"max_tokens", 6}, {"temperature", 0}, {"logprobs", 1}, {"echo", true}};
  json body = common;
  body["prompt"] = prompts;
  body["n"] = 2;
  const json batch = post(h, "/v1/completions", body);
  ASSERT_EQ(batch["choices"].size(), 6u);
  int64_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    json one = common;
    one["prompt"] = prompts[p];
    const json alone = post(h, "/v1/completions", one);
    prompt_tokens += alone["usage"]["prompt_tokens"].get<int64_t>();
    completion_tokens += 2 * alone["usage"]["completion_tokens"].get<int64_t>();
    for (size_t i = 0; i < 2; ++i) {
      const json& c = batch["choices"][p * 2 + i];
      EXPECT_EQ(c["index"], p * 2 + i);
      EXPECT_EQ(c["text"], alone["choices"][0]["text"]) << p;
      EXPECT_EQ(c["logprobs"], alone["choices"][0]["logprobs"]) << p;
    }
  }
  EXPECT_EQ(batch["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(batch["usage"]["completion_tokens"], completion_tokens);

  // Token-id prompts, streamed.
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& p : prompts) ids.push_back(post(h, "/tokenize", {{"prompt", p}})["tokens"]);
  auto stream = h.complete({{"prompt", ids}, {"max_tokens", 6}, {"temperature", 0}, {"echo", true}, {"stream", true}});
  ASSERT_EQ(stream->status, 200);
  std::vector<std::string> texts(prompts.size());
  for (const json& chunk : stream->sse_json())
    for (const json& c : chunk["choices"]) texts.at(c["index"].get<size_t>()) += c["text"].get<std::string>();
  for (size_t p = 0; p < prompts.size(); ++p) EXPECT_EQ(texts[p], batch["choices"][p * 2]["text"]) << p;

  // One prompt past the context refuses the whole batch, naming the prompt.
  json too_long = {{"prompt", {"Once", std::string(size_t(h.engine->limits().n_ctx) * 64, 'a')}}, {"max_tokens", 4}};
  auto refused = h.complete(too_long);
  EXPECT_EQ(refused->status, 400);
  EXPECT_EQ(refused->body_json()["error"]["param"], "prompt");
}

TEST(ServiceBatch, SeededChoicesDrawAsTheirPromptAlone) {
  Harness h(uncached());
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog"};
  const json batch = post(h, "/v1/completions",
                          {{"prompt", prompts}, {"max_tokens", 12}, {"temperature", 2.0}, {"seed", 11}, {"n", 2}});
  for (size_t p = 0; p < prompts.size(); ++p) {
    const json alone = post(h, "/v1/completions",
                            {{"prompt", prompts[p]}, {"max_tokens", 12}, {"temperature", 2.0}, {"seed", 11}, {"n", 2}});
    for (size_t i = 0; i < 2; ++i)
      EXPECT_EQ(batch["choices"][p * 2 + i]["text"], alone["choices"][i]["text"]) << p << " " << i;
  }
  EXPECT_NE(batch["choices"][0]["text"], batch["choices"][1]["text"]) << "the seeds of one prompt differ";
}

TEST(ServiceBatch, MoreChoicesThanTheQueueHoldsIsA400) {
  ServiceOptions o;
  o.max_queue = 8;
  Harness h(o);
  auto r = h.complete({{"prompt", {"a", "b", "c"}}, {"n", 3}, {"max_tokens", 2}});
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(r->body_json()["error"]["param"], "n");
  EXPECT_EQ(h.complete({{"prompt", {"a", "b"}}, {"n", 3}, {"max_tokens", 2}})->status, 200);
}

TEST(ServiceBatch, ABatchIsCachedWhole) {
  Harness h;
  const json body = {{"prompt", {"Once upon a time", "The little dog"}}, {"max_tokens", 5}, {"temperature", 0}};
  auto first = h.complete(body);
  auto second = h.complete(body);
  ASSERT_EQ(second->status, 200) << second->body;
  EXPECT_EQ(second->header("X-Tessera-Cache"), "hit");
  EXPECT_EQ(second->body_json()["choices"], first->body_json()["choices"]);
  json other = body;
  other["prompt"] = {"Once upon a time"};
  EXPECT_NE(h.complete(other)->header("X-Tessera-Cache"), "hit");
}

}  // namespace
}  // namespace tessera::server
