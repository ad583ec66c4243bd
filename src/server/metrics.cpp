// Metric registration and updates.
#include "server/metrics.h"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace tessera::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// vLLM's buckets for the latency histograms, so that quantiles line up with its dashboards.
const Histogram::BucketBoundaries kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                                  0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
const Histogram::BucketBoundaries kItlBuckets = {0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                                 0.3,   0.4,   0.5,  0.75,  1.0,  2.5,   5.0, 7.5,  10.0};
const Histogram::BucketBoundaries kE2eBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0, 15.0,
                                                 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0};
const Histogram::BucketBoundaries kBatchBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
const Histogram::BucketBoundaries kBatchTokenBuckets = {1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};

}  // namespace

Metrics::Metrics(const std::string& model_name, const std::string& prefix)
    : model_name_(model_name), registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  const auto l = labels();
  waiting_ = &BuildGauge().Name(prefix + "num_requests_waiting").Help("Requests waiting to be scheduled.")
                  .Register(r).Add(l);
  running_ = &BuildGauge().Name(prefix + "num_requests_running").Help("Requests in the running batch.")
                  .Register(r).Add(l);
  kv_usage_ = &BuildGauge().Name(prefix + "kv_cache_usage_perc").Help("KV cache usage (1 = full).")
                   .Register(r).Add(l);
  ready_ = &BuildGauge().Name(prefix + "ready").Help("1 once warm-up passed and the model is healthy.")
                .Register(r).Add(l);
  prefix_hits_ = &BuildCounter().Name(prefix + "prefix_cache_hits_total")
                      .Help("Prompt tokens served from the prefix cache.").Register(r).Add(l);
  prefix_queries_ = &BuildCounter().Name(prefix + "prefix_cache_queries_total")
                         .Help("Prompt tokens looked up in the prefix cache.").Register(r).Add(l);
  preemptions_ = &BuildCounter().Name(prefix + "num_preemptions_total").Help("Sequences preempted.")
                      .Register(r).Add(l);
  prompt_tokens_ = &BuildCounter().Name(prefix + "prompt_tokens_total").Help("Prompt tokens processed.")
                        .Register(r).Add(l);
  generation_tokens_ = &BuildCounter().Name(prefix + "generation_tokens_total").Help("Tokens generated.")
                            .Register(r).Add(l);
  ttft_ = &BuildHistogram().Name(prefix + "time_to_first_token_seconds").Help("Time to first token.")
               .Register(r).Add(l, kTtftBuckets);
  itl_ = &BuildHistogram().Name(prefix + "inter_token_latency_seconds").Help("Time between streamed tokens.")
              .Register(r).Add(l, kItlBuckets);
  e2e_ = &BuildHistogram().Name(prefix + "e2e_request_latency_seconds").Help("Request latency, submit to finish.")
              .Register(r).Add(l, kE2eBuckets);
  queue_time_ = &BuildHistogram().Name(prefix + "request_queue_time_seconds").Help("Time waiting to be scheduled.")
                     .Register(r).Add(l, kTtftBuckets);
  batch_size_ = &BuildHistogram().Name(prefix + "batch_size").Help("Sequences per engine step.")
                     .Register(r).Add(l, kBatchBuckets);
  batch_tokens_ = &BuildHistogram().Name(prefix + "batch_tokens").Help("Tokens per engine step.")
                       .Register(r).Add(l, kBatchTokenBuckets);
  timeouts_ = &BuildCounter().Name(prefix + "request_timeouts_total").Help("Requests ended by their deadline.")
                   .Register(r).Add(l);
  cancellations_ = &BuildCounter().Name(prefix + "request_cancellations_total")
                        .Help("Requests cancelled (client disconnect, shutdown).").Register(r).Add(l);
  cache_hits_ = &BuildCounter().Name(prefix + "result_cache_hits_total").Help("Requests served from the result cache.")
                     .Register(r).Add(l);
  cache_misses_ = &BuildCounter().Name(prefix + "result_cache_misses_total")
                       .Help("Cacheable requests not found in the result cache.").Register(r).Add(l);
  fallbacks_ = &BuildCounter().Name(prefix + "fallbacks_total")
                    .Help("Requests re-run on the fallback model after the primary failed.").Register(r).Add(l);
  success_family_ = &BuildCounter().Name(prefix + "request_success_total")
                         .Help("Finished requests by finish reason.").Register(r);
  rejections_family_ = &BuildCounter().Name(prefix + "request_rejections_total")
                            .Help("Requests refused before the engine, by reason.").Register(r);
  errors_family_ = &BuildCounter().Name(prefix + "http_errors_total").Help("Error responses by HTTP status code.")
                        .Register(r);
  for (const char* reason : {"stop", "length", "timeout", "cancelled", "error"})
    success_family_->Add(labels({{"finished_reason", reason}}));
  for (const char* reason : {"rate_limit", "queue_full", "too_long", "unauthorized", "draining"})
    rejections_family_->Add(labels({{"reason", reason}}));
}

prometheus::Labels Metrics::labels(std::initializer_list<std::pair<const std::string, std::string>> extra) const {
  prometheus::Labels l{{"model_name", model_name_}};
  for (const auto& [k, v] : extra) l[k] = v;
  return l;
}

void Metrics::update_engine(const EngineStats& s) {
  waiting_->Set(double(s.n_waiting));
  running_->Set(double(s.n_running));
  kv_usage_->Set(s.kv_usage());
  std::lock_guard lock(mutex_);
  auto advance = [](prometheus::Counter* c, uint64_t now, uint64_t& seen) {
    if (now > seen) c->Increment(double(now - seen));
    seen = now > seen ? now : seen;
  };
  advance(prefix_hits_, s.n_prefix_cache_hit_tokens, seen_prefix_hits_);
  advance(prefix_queries_, s.n_prefix_cache_query_tokens, seen_prefix_queries_);
  advance(preemptions_, s.n_preemptions, seen_preemptions_);
}

void Metrics::observe_step(const StepStats& step) {
  batch_size_->Observe(double(step.n_seqs));
  batch_tokens_->Observe(double(step.n_tokens));
}

void Metrics::observe_request(const RequestStats& s, FinishReason reason) {
  prompt_tokens_->Increment(double(s.n_prompt_tokens));
  generation_tokens_->Increment(double(s.n_generated_tokens));
  if (s.n_generated_tokens > 0) ttft_->Observe(s.time_to_first_token_seconds);
  e2e_->Observe(s.e2e_seconds);
  queue_time_->Observe(s.queue_seconds);
  success_family_->Add(labels({{"finished_reason", finish_reason_name(reason)}})).Increment();
}

void Metrics::observe_inter_token(double seconds) { itl_->Observe(seconds); }

void Metrics::count_rejection(const std::string& reason) {
  rejections_family_->Add(labels({{"reason", reason}})).Increment();
}

void Metrics::count_status(int http_status) {
  if (http_status < 400) return;
  errors_family_->Add(labels({{"status", std::to_string(http_status)}})).Increment();
}

std::string Metrics::serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace tessera::server
