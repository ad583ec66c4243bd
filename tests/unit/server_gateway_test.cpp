// Gateway units: SSE framing, API keys, token buckets, the result cache, metrics exposition.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"

#include "server/auth.h"
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

TEST(ServerAuth, BearerKeys) {
  ApiKeys keys({"sk-one", "sk-two"});
  EXPECT_TRUE(keys.enabled());
  EXPECT_EQ(keys.check("Bearer sk-two"), "sk-two");
  EXPECT_EQ(keys.check("bearer sk-one"), "sk-one");
  EXPECT_FALSE(keys.check("Bearer sk-on"));
  EXPECT_FALSE(keys.check("Bearer sk-one1"));
  EXPECT_FALSE(keys.check("sk-one"));
  EXPECT_FALSE(keys.check(""));
  EXPECT_FALSE(ApiKeys().enabled());
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("", "a"));
}

TEST(ServerAuth, KeysFile) {
  const std::string path = ::testing::TempDir() + "/tessera_keys.txt";
  {
    std::ofstream out(path);
    out << "# comment\n\n  sk-a  \r\nsk-b\n";
  }
  EXPECT_EQ(ApiKeys::read_file(path), (std::vector<std::string>{"sk-a", "sk-b"}));
  EXPECT_THROW(ApiKeys::read_file(path + ".missing"), Error);
}

TEST(ServerRateLimiter, RequestsPerSecondRefill) {
  RateLimiter lim({/*rps=*/2.0, /*burst=*/2.0, /*tpm=*/0.0});
  const auto t0 = RateLimiter::Clock::time_point{} + 100s;
  EXPECT_TRUE(lim.acquire("k", 0, t0).allowed);
  EXPECT_TRUE(lim.acquire("k", 0, t0).allowed);
  const auto d = lim.acquire("k", 0, t0);
  EXPECT_FALSE(d.allowed);
  EXPECT_STREQ(d.reason, "requests");
  EXPECT_NEAR(d.retry_after_s, 0.5, 1e-9);
  EXPECT_TRUE(lim.acquire("other", 0, t0).allowed);  // per key
  EXPECT_TRUE(lim.acquire("k", 0, t0 + 500ms).allowed);
  EXPECT_FALSE(lim.acquire("k", 0, t0 + 500ms).allowed);
}

TEST(ServerRateLimiter, TokensPerMinuteWithRefund) {
  RateLimiter lim({0.0, 0.0, /*tpm=*/600.0});
  const auto t0 = RateLimiter::Clock::time_point{} + 100s;
  EXPECT_TRUE(lim.acquire("k", 500, t0).allowed);
  auto d = lim.acquire("k", 200, t0);
  EXPECT_FALSE(d.allowed);
  EXPECT_STREQ(d.reason, "tokens");
  EXPECT_NEAR(d.retry_after_s, 10.0, 1e-6);  // 100 tokens short at 10 tokens/s
  lim.refund("k", 100, t0);
  EXPECT_TRUE(lim.acquire("k", 200, t0).allowed);
  EXPECT_FALSE(RateLimiter({}).enabled());
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

TEST(ServerResultCache, KeyCoversParametersAndPrompt) {
  ApiRequest a;
  a.sampling.temperature = 0.0f;
  ApiRequest b = a;
  EXPECT_EQ(result_cache_key(a, "m", {1, 2}), result_cache_key(b, "m", {1, 2}));
  EXPECT_NE(result_cache_key(a, "m", {1, 2}), result_cache_key(a, "m", {1, 3}));
  EXPECT_NE(result_cache_key(a, "m", {1, 2}), result_cache_key(a, "m2", {1, 2}));
  b.sampling.max_tokens = 99;
  EXPECT_NE(result_cache_key(a, "m", {1, 2}), result_cache_key(b, "m", {1, 2}));
  b = a;
  b.sampling.stop = {"x"};
  EXPECT_NE(result_cache_key(a, "m", {1, 2}), result_cache_key(b, "m", {1, 2}));
  ApiRequest sampled;
  sampled.sampling.temperature = 1.0f;
  EXPECT_FALSE(sampled.deterministic());
  sampled.sampling.has_seed = true;
  EXPECT_TRUE(sampled.deterministic());
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
  m.observe_step({4, 40, 30, 10, 0.01});
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
