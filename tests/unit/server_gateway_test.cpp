// Gateway units: SSE framing, API keys, token buckets, the result cache, metrics exposition.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <fstream>
#include <future>
#include <thread>

#include "core/error.h"

#include "model/model.h"
#include "server/auth.h"
#include "server/engine_health.h"
#include "server/origin_policy.h"
#include "server/request_workers.h"
#include "server/cache_scope.h"
#include "server/metrics.h"
#include "server/rate_limiter.h"
#include "server/result_cache.h"
#include "server/sse.h"

namespace tessera::server {
namespace {

using namespace std::chrono_literals;

TEST(ServerSse, FramesAndParsesBack) {
  EXPECT_EQ(sse_event("{\"a\":1}"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_event("x\ny"), "data: x\ndata: y\n\n");
  SseParser p;
  const std::string all = sse_event("one") + sse_event("two\nlines") + sse_done();
  std::vector<std::string> got;
  std::string data;
  for (char c : all) {  // byte by byte: events split anywhere
    p.feed(std::string_view(&c, 1));
    while (p.next(data)) got.push_back(data);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"one", "two\nlines", "[DONE]"}));
  SseParser crlf;
  crlf.feed("data: x\r\n\r\n");
  ASSERT_TRUE(crlf.next(data));
  EXPECT_EQ(data, "x");
}

TEST(ServerSse, KeepsTheErrorsServersReportInAStream) {
  SseParser p;
  p.feed("error: {\"message\":\"full\"}\n\nevent: error\ndata: {\"detail\":\"x\"}\n\nevent: error\n\n"
         "event: message\ndata: ok\n\nerrors: no\ndata:plain\n\n");
  SseEvent e;
  ASSERT_TRUE(p.next(e));
  EXPECT_EQ(e.error, "{\"message\":\"full\"}");
  EXPECT_EQ(e.data, "");
  ASSERT_TRUE(p.next(e));
  EXPECT_EQ(e.error, "{\"detail\":\"x\"}");
  ASSERT_TRUE(p.next(e));
  EXPECT_EQ(e.error, "error");
  ASSERT_TRUE(p.next(e));
  EXPECT_EQ(e.error, "");
  EXPECT_EQ(e.data, "ok");
  ASSERT_TRUE(p.next(e));
  EXPECT_EQ(e.error, "");  // a field named "errors" is not "error"
  EXPECT_EQ(e.data, "plain");
  EXPECT_FALSE(p.next(e));
}

std::vector<ApiKey> plain_keys(std::initializer_list<const char*> keys) {
  std::vector<ApiKey> out;
  for (const char* k : keys) out.push_back(ApiKey{k, {}, 0, {}, {}, {}});
  return out;
}

TEST(ServerAuth, BearerKeys) {
  ApiKeys keys(plain_keys({"sk-one", "sk-two"}));
  EXPECT_TRUE(keys.enabled());
  ASSERT_NE(keys.check("Bearer sk-two"), nullptr);
  EXPECT_EQ(keys.check("Bearer sk-two")->key, "sk-two");
  EXPECT_EQ(keys.check("Bearer sk-two")->name, "#2");  // the identity caches are keyed on
  EXPECT_EQ(keys.check("bearer sk-one")->name, "#1");
  EXPECT_FALSE(keys.check("Bearer sk-on"));
  EXPECT_FALSE(keys.check("Bearer sk-one1"));
  EXPECT_FALSE(keys.check("sk-one"));
  EXPECT_FALSE(keys.check(""));
  EXPECT_FALSE(ApiKeys().enabled());
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_THROW(ApiKeys(plain_keys({"sk-one", "sk-one"})), Error);
  EXPECT_THROW(ApiKeys(plain_keys({"sk-one", ""})), Error) << "an empty key (an unset variable) is refused";
}

TEST(ServerAuth, KeysFileWithAttributes) {
  const std::string path = ::testing::TempDir() + "/tessera_keys.txt";
  {
    std::ofstream out(path);
    out << "# comment\n\n  sk-a  \r\nsk-b name=alice priority_min=-10 rps=2.5 tpm=1000 burst=4\n"
           "sk-c priority_min=5\n";
  }
  const std::vector<ApiKey> read = ApiKeys::read_file(path);
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(read[0].key, "sk-a");
  EXPECT_EQ(read[0].priority_min, 0);
  EXPECT_FALSE(read[0].rps);
  EXPECT_EQ(read[1].key, "sk-b");
  EXPECT_EQ(read[1].name, "alice");
  EXPECT_EQ(read[1].priority_min, -10);
  EXPECT_EQ(read[1].default_priority(), 0);
  EXPECT_EQ(read[2].default_priority(), 5);  // a request without a priority runs at the key's floor
  const RateLimits l = read[1].limits({1.0, 0.0, 50.0});
  EXPECT_EQ(l.requests_per_second, 2.5);
  EXPECT_EQ(l.tokens_per_minute, 1000.0);
  EXPECT_EQ(l.request_burst, 4.0);
  EXPECT_EQ(read[0].limits({1.0, 0.0, 50.0}).tokens_per_minute, 50.0);
  const ApiKeys keys(read);
  EXPECT_EQ(keys.check("Bearer sk-a")->name, "#1");
  EXPECT_EQ(keys.check("Bearer sk-b")->name, "alice");
  EXPECT_THROW(ApiKeys::read_file(path + ".missing"), Error);
  // The environment variable's form: entries separated by commas too.
  const auto env = ApiKeys::parse("sk-x name=x,sk-y\nsk-z", "TESSERA_API_KEYS", "\n,");
  ASSERT_EQ(env.size(), 3u);
  EXPECT_EQ(env[2].key, "sk-z");
}

// Errors name the entry and the attribute, never the key.
TEST(ServerAuth, KeysFileErrorsNeverQuoteTheKey) {
  for (const std::string bad : {"sk-secret colour=blue", "sk-secret name=", "sk-secret name=a/b", "sk-secret rps=-1",
                                "sk-secret tpm=x", "sk-secret priority_min=1.5", "sk-secret bare"}) {
    try {
      ApiKeys::parse("sk-ok\n" + bad, "keys");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.find("sk-secret"), std::string::npos) << message;
      EXPECT_EQ(message.rfind("keys entry 2: ", 0), 0u) << message;
    }
  }
}

TEST(ServerRateLimiter, RequestsPerSecondRefill) {
  RateLimiter lim;
  const RateLimits l{/*rps=*/2.0, /*burst=*/2.0, /*tpm=*/0.0};
  const auto t0 = RateLimiter::Clock::time_point{} + 100s;
  EXPECT_TRUE(lim.acquire_request("k", l, t0).allowed);
  EXPECT_TRUE(lim.acquire_request("k", l, t0).allowed);
  const auto d = lim.acquire_request("k", l, t0);
  EXPECT_FALSE(d.allowed);
  EXPECT_STREQ(d.reason, "requests");
  EXPECT_NEAR(d.retry_after_s, 0.5, 1e-9);
  EXPECT_TRUE(lim.acquire_request("other", l, t0).allowed);  // per key
  EXPECT_TRUE(lim.acquire_request("k", l, t0 + 500ms).allowed);
  EXPECT_FALSE(lim.acquire_request("k", l, t0 + 500ms).allowed);
  EXPECT_TRUE(lim.acquire_tokens("k", l, 1e9, t0).allowed);  // no token limit
  // Each key's own limits: this one allows 10 per second.
  const RateLimits fast{10.0, 0.0, 0.0};
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(lim.acquire_request("fast", fast, t0).allowed);
  EXPECT_FALSE(lim.acquire_request("fast", fast, t0).allowed);
}

TEST(ServerRateLimiter, TokensPerMinuteWithRefund) {
  RateLimiter lim;
  const RateLimits l{0.0, 0.0, /*tpm=*/600.0};
  const auto t0 = RateLimiter::Clock::time_point{} + 100s;
  EXPECT_TRUE(lim.acquire_tokens("k", l, 500, t0).allowed);
  auto d = lim.acquire_tokens("k", l, 200, t0);
  EXPECT_FALSE(d.allowed);
  EXPECT_STREQ(d.reason, "tokens");
  EXPECT_NEAR(d.retry_after_s, 10.0, 1e-6);  // 100 tokens short at 10 tokens/s
  lim.refund("k", l, 100, t0);
  EXPECT_TRUE(lim.acquire_tokens("k", l, 200, t0).allowed);
  EXPECT_TRUE(lim.acquire_request("k", l, t0).allowed);  // no request limit
  EXPECT_FALSE(RateLimits{}.limits_requests() || RateLimits{}.limits_tokens());
}

CachedResult result(const std::string& text) {
  CachedResult r;
  r.choices.push_back(ChoiceResult{text, {}, FinishReason::Stop, 1});
  r.prompt_tokens = 3;
  return r;
}

TEST(ServerResultCache, LruTtlAndMemoryCap) {
  const auto t0 = ResultCache::Clock::time_point{} + 100s;
  ResultCache cache(1 << 20, 1000ms);
  cache.put("a", result("A"), t0);
  cache.put("b", result("B"), t0);
  ASSERT_TRUE(cache.get("a", t0));
  EXPECT_EQ(cache.get("a", t0)->choices[0].text, "A");
  EXPECT_FALSE(cache.get("a", t0 + 1000ms));  // expired and dropped
  EXPECT_EQ(cache.size(), 1u);

  // A cap that holds two entries: the least recently used goes first.
  const uint64_t one = result_bytes(result("X")) + 1 + 128;
  ResultCache small(2 * one, 60s);
  small.put("x", result("X"), t0);
  small.put("y", result("Y"), t0);
  ASSERT_TRUE(small.get("x", t0));  // x is now the most recent
  small.put("z", result("Z"), t0);
  EXPECT_TRUE(small.get("x", t0));
  EXPECT_FALSE(small.get("y", t0));
  EXPECT_TRUE(small.get("z", t0));
  EXPECT_LE(small.bytes(), 2 * one);

  ResultCache off(0, 60s);
  off.put("a", result("A"), t0);
  EXPECT_FALSE(off.get("a", t0));
}

TEST(ServerResultCache, KeyCoversTenantSaltParametersAndPrompt) {
  ApiRequest a;
  a.sampling.temperature = 0.0f;
  ApiRequest b = a;
  const std::string t = "alice";
  EXPECT_EQ(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(b, "m", {{1, 2}}, t));
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(a, "m", {{1, 3}}, t));
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(a, "m", {{1, 2}, {3}}, t)) << "a batch";
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}, {3}}, t), result_cache_key(a, "m", {{1}, {2, 3}}, t));
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(a, "m2", {{1, 2}}, t));
  // What one tenant asked is never another's hit; the salt separates further within a tenant.
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(a, "m", {{1, 2}}, "bob"));
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(a, "m", {{1, 2}}, ""));
  b.cache_salt = "s1";
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(b, "m", {{1, 2}}, t));
  b = a;
  b.sampling.max_tokens = 99;
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(b, "m", {{1, 2}}, t));
  b = a;
  b.sampling.stop = {"x"};
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(b, "m", {{1, 2}}, t));
  // The token controls change the output: each is part of the key, down to the bias's value.
  b = a;
  b.sampling.logit_bias = {{5, -100.0f}};
  ApiRequest c = b;
  c.sampling.logit_bias = {{5, -99.0f}};
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(b, "m", {{1, 2}}, t));
  EXPECT_NE(result_cache_key(b, "m", {{1, 2}}, t), result_cache_key(c, "m", {{1, 2}}, t));
  b = a;
  b.sampling.stop_token_ids = {5};
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(b, "m", {{1, 2}}, t));
  b = a;
  b.sampling.min_tokens = 3;
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(b, "m", {{1, 2}}, t));
  b = a;
  b.echo = true;
  EXPECT_NE(result_cache_key(a, "m", {{1, 2}}, t), result_cache_key(b, "m", {{1, 2}}, t));
  ApiRequest sampled;
  sampled.sampling.temperature = 1.0f;
  EXPECT_FALSE(sampled.deterministic());
  sampled.sampling.has_seed = true;
  EXPECT_TRUE(sampled.deterministic());
}

// SipHash-2-4's reference vectors (key 00..0f), and namespaces: a secret per process, tenants apart unless shared.
TEST(ServerCacheScopes, KeyedNamespacesPerTenantAndSalt) {
  const uint64_t k0 = 0x0706050403020100ull, k1 = 0x0f0e0d0c0b0a0908ull;
  EXPECT_EQ(siphash24(k0, k1, ""), 0x726fdb47dd0e0e31ull);
  std::string fifteen;
  for (char c = 0; c < 15; ++c) fifteen.push_back(c);
  EXPECT_EQ(siphash24(k0, k1, fifteen), 0xa129ca6149be45e5ull);
  const CacheScopes apart(false), shared(true), other_process(false);
  EXPECT_EQ(apart.prefix_namespace("", ""), 0u);
  EXPECT_NE(apart.prefix_namespace("alice", ""), 0u);
  EXPECT_NE(apart.prefix_namespace("alice", ""), apart.prefix_namespace("bob", ""));
  EXPECT_NE(apart.prefix_namespace("alice", ""), apart.prefix_namespace("alice", "s"));
  EXPECT_NE(apart.prefix_namespace("ab", "c"), apart.prefix_namespace("a", "bc"));
  EXPECT_EQ(apart.prefix_namespace("alice", "s"), apart.prefix_namespace("alice", "s"));
  EXPECT_NE(apart.prefix_namespace("alice", ""), other_process.prefix_namespace("alice", ""));
  EXPECT_EQ(shared.prefix_namespace("alice", ""), 0u);
  EXPECT_EQ(shared.prefix_namespace("alice", "s"), shared.prefix_namespace("bob", "s"));
  EXPECT_NE(shared.prefix_namespace("alice", "s"), 0u);
}

TEST(ServerOriginPolicy, HostAndOriginChecks) {
  for (const char* h : {"localhost", "LOCALHOST:8080", "localhost.", "127.0.0.1", "127.9.8.7:1", "::1", "[::1]:8080",
                        "app.localhost"})
    EXPECT_TRUE(is_loopback_host(h)) << h;
  for (const char* h : {"evil.example", "10.0.0.1", "localhost.evil.example", "[::2]", "0.0.0.0", ""})
    EXPECT_FALSE(is_loopback_host(h)) << h;
  const OriginPolicy loopback("127.0.0.1", {}, {});
  EXPECT_TRUE(loopback.host_allowed("localhost:8080"));
  EXPECT_TRUE(loopback.host_allowed(""));  // HTTP/1.0 clients send none; browsers always do
  EXPECT_FALSE(loopback.host_allowed("evil.example:8080"));
  EXPECT_FALSE(loopback.host_allowed("192.168.1.5"));
  const OriginPolicy wildcard("0.0.0.0", {}, {});  // reached by names it cannot know: no check by default
  EXPECT_TRUE(wildcard.host_allowed("anything.example"));
  const OriginPolicy listed("0.0.0.0", {"API.example", "10.1.2.3:8080"}, {});
  EXPECT_TRUE(listed.host_allowed("api.example:443"));
  EXPECT_TRUE(listed.host_allowed("10.1.2.3"));
  EXPECT_FALSE(listed.host_allowed("localhost"));
  EXPECT_TRUE(OriginPolicy("127.0.0.1", {"*"}, {}).host_allowed("evil.example"));
  EXPECT_TRUE(loopback.origin_allowed(""));
  EXPECT_FALSE(loopback.origin_allowed("http://localhost:3000"));
  EXPECT_FALSE(loopback.cors("http://localhost:3000"));
  const OriginPolicy cors("127.0.0.1", {}, {"https://app.example"});
  EXPECT_TRUE(cors.origin_allowed("https://app.example"));
  EXPECT_TRUE(cors.cors("https://app.example"));
  EXPECT_FALSE(cors.origin_allowed("https://app.example.evil"));
  EXPECT_FALSE(cors.origin_allowed("null"));
  EXPECT_TRUE(OriginPolicy("127.0.0.1", {}, {"*"}).origin_allowed("null"));
}

TEST(ServerRequestWorkers, RunJobsAndRefuseBeyondTheQueue) {
  RequestWorkers workers(1, 2, "parse");
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran = 0;
  std::promise<void> started;
  char name[32] = {};
  EXPECT_TRUE(workers.post([&] {
    pthread_getname_np(pthread_self(), name, sizeof name);
    started.set_value();
    released.wait();
    ++ran;
  }));
  started.get_future().wait();  // the one thread is busy now
  EXPECT_STREQ(name, "parse-0");
  EXPECT_TRUE(workers.post([&] { ++ran; }));
  EXPECT_TRUE(workers.post([&] { ++ran; }));
  EXPECT_FALSE(workers.post([&] { ++ran; })) << "a third queued job is over the bound";
  EXPECT_EQ(workers.n_queued(), 2u);
  release.set_value();
  for (int i = 0; i < 500 && ran < 3; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(ran.load(), 3);
  EXPECT_TRUE(workers.post([&] { ++ran; }));
}

// The health probe: the warm-up inference passes on a working engine and fails on one that stopped; the change
// is reported.
TEST(ServerEngineHealth, ProbesPassAndFailWithTheEngine) {
  EngineOptions o;
  o.threads = 1;
  o.kv_blocks = 64;
  auto engine = std::make_shared<Engine>(Model::load_embedded(), o);
  std::atomic<int> changes = 0;
  EngineHealth health("primary", engine, 50ms, [&] { ++changes; });
  EXPECT_TRUE(health.ok());
  EXPECT_FALSE(health.probed());
  EXPECT_TRUE(health.check_now());
  EXPECT_TRUE(health.probed());
  EXPECT_EQ(changes.load(), 1);
  health.check_soon();  // passes again: no change
  engine->stop();
  health.check_soon();
  for (int i = 0; i < 500 && health.ok(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(health.ok());
  EXPECT_EQ(changes.load(), 2);
}

EngineStats sample_engine_stats() {
  EngineStats s;
  s.n_waiting = 3;
  s.n_running = 2;
  s.kv_blocks_total = 10;
  s.kv_blocks_used = 5;
  s.n_prefix_cache_hit_tokens = 7;
  return s;
}

// One scrape's worth of engine stats and request outcomes.
void record_sample_traffic(Metrics& m) {
  m.update_engine(sample_engine_stats());
  m.observe_step({.n_seqs = 4, .n_tokens = 40, .n_prefill_tokens = 30, .n_decode_tokens = 10, .seconds = 0.01});
  RequestStats rs;
  rs.n_prompt_tokens = 5;
  rs.n_generated_tokens = 6;
  m.observe_request(rs, FinishReason::Length);
  m.count_rejection("rate_limit");
  m.count_status(429);
  m.count_cache_hit();
  m.count_fallback();
}

TEST(ServerMetrics, DefaultNamesUseTesseraUnderscorePrefix) {
  Metrics m("stories");
  record_sample_traffic(m);
  const std::string text = m.serialize();
  EXPECT_EQ(text.find(':'), std::string::npos) << "no colon in any default name";
  for (const char* name :
       {"tessera_num_requests_waiting{model_name=\"stories\"} 3", "tessera_num_requests_running",
        "tessera_time_to_first_token_seconds_bucket", "tessera_inter_token_latency_seconds",
        "tessera_e2e_request_latency_seconds", "tessera_request_queue_time_seconds",
        "tessera_kv_cache_usage_perc{model_name=\"stories\"} 0.5", "tessera_prefix_cache_hits_total{model_name=\"stories\"} 7",
        "tessera_prompt_tokens_total{model_name=\"stories\"} 5", "tessera_generation_tokens_total{model_name=\"stories\"} 6",
        "tessera_batch_size_bucket", "tessera_batch_tokens_bucket", "tessera_num_preemptions_total",
        "tessera_request_rejections_total", "reason=\"rate_limit\"} 1", "tessera_request_timeouts_total",
        "tessera_request_cancellations_total", "tessera_result_cache_hits_total{model_name=\"stories\"} 1",
        "tessera_fallbacks_total{model_name=\"stories\"} 1", "tessera_http_errors_total", "status=\"429\"",
        "tessera_request_success_total{finished_reason=\"length\",model_name=\"stories\"} 1", "tessera_ready"})
    EXPECT_NE(text.find(name), std::string::npos) << name;
  // Counters only move forward: a second scrape with the same totals adds nothing.
  m.update_engine(sample_engine_stats());
  EXPECT_NE(m.serialize().find("tessera_prefix_cache_hits_total{model_name=\"stories\"} 7"), std::string::npos);
}

// vLLM's exact names for what vLLM exports too; Tessera's own metrics keep tessera_ (no invented vllm: names).
TEST(ServerMetrics, VllmPrefixGivesVllmNames) {
  Metrics m("stories", "vllm:");
  record_sample_traffic(m);
  const std::string text = m.serialize();
  for (const char* name :
       {"vllm:num_requests_waiting{model_name=\"stories\"} 3", "vllm:num_requests_running{model_name=\"stories\"} 2",
        "vllm:kv_cache_usage_perc{model_name=\"stories\"} 0.5", "vllm:gpu_cache_usage_perc{model_name=\"stories\"} 0.5",
        "vllm:prefix_cache_hits_total{model_name=\"stories\"} 7", "vllm:prefix_cache_queries_total",
        "vllm:num_preemptions_total", "vllm:prompt_tokens_total{model_name=\"stories\"} 5",
        "vllm:generation_tokens_total{model_name=\"stories\"} 6",
        "vllm:request_success_total{finished_reason=\"length\",model_name=\"stories\"} 1",
        "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket", "vllm:request_queue_time_seconds_bucket",
        "vllm:iteration_tokens_total_bucket", "tessera_batch_size_bucket", "tessera_ready",
        "tessera_request_rejections_total", "tessera_result_cache_hits_total", "tessera_fallbacks_total",
        "tessera_http_errors_total", "tessera_request_timeouts_total", "tessera_request_cancellations_total"})
    EXPECT_NE(text.find(name), std::string::npos) << name;
  for (const char* absent : {"vllm:batch_size", "vllm:ready", "vllm:http_errors", "tessera_num_requests_waiting",
                             "tessera_batch_tokens", "vllm:batch_tokens"})
    EXPECT_EQ(text.find(absent), std::string::npos) << absent;
}

TEST(ServerMetrics, AnyOtherPrefixReplacesTessera) {
  const MetricNames n = metric_names("fleet_a:");
  EXPECT_EQ(n.num_requests_waiting, "fleet_a:num_requests_waiting");
  EXPECT_EQ(n.batch_tokens, "fleet_a:batch_tokens");
  EXPECT_EQ(n.ready, "fleet_a:ready");
  EXPECT_TRUE(n.kv_cache_usage_aliases.empty());
}

TEST(ServerMetrics, InvalidPrefixIsRefusedWithTheRule) {
  for (const char* bad : {"", "9lives_", "tessera-", "tess era_", "t\xc3\xa9_"}) {
    EXPECT_FALSE(metrics_prefix_problem(bad).empty()) << bad;
    EXPECT_THROW(Metrics("m", bad), Error) << bad;
  }
  EXPECT_NE(metrics_prefix_problem("a-b").find("letters, digits, '_' and ':'"), std::string::npos);
  for (const char* good : {"tessera_", "vllm:", "_x", ":x9"}) EXPECT_EQ(metrics_prefix_problem(good), "") << good;
}

}  // namespace
}  // namespace tessera::server
