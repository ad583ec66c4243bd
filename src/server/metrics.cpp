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

Metrics::Metrics(const std::string& model_name, std::string_view prefix)
    : model_name_(model_name), registry_(std::make_shared<prometheus::Registry>()) {
  const MetricNames n = metric_names(prefix);
  auto& r = *registry_;
  const auto l = labels();
  auto gauge = [&](const std::string& name, const char* help) {
    return &BuildGauge().Name(name).Help(help).Register(r).Add(l);
  };
  auto counter = [&](const std::string& name, const char* help) {
    return &BuildCounter().Name(name).Help(help).Register(r).Add(l);
  };
  auto histogram = [&](const std::string& name, const char* help, const Histogram::BucketBoundaries& buckets) {
    return &BuildHistogram().Name(name).Help(help).Register(r).Add(l, buckets);
  };
  waiting_ = gauge(n.num_requests_waiting, "Requests waiting to be scheduled.");
  running_ = gauge(n.num_requests_running, "Requests in the running batch.");
  kv_usage_ = gauge(n.kv_cache_usage, "KV cache usage (1 = full).");
  for (const std::string& alias : n.kv_cache_usage_aliases)
    kv_usage_aliases_.push_back(gauge(alias, "KV cache usage (1 = full); an older name of the same gauge."));
  ready_ = gauge(n.ready, "1 once warm-up passed and the model is healthy.");
  prefix_hits_ = counter(n.prefix_cache_hits, "Prompt tokens served from the prefix cache.");
  prefix_queries_ = counter(n.prefix_cache_queries, "Prompt tokens looked up in the prefix cache.");
  preemptions_ = counter(n.preemptions, "Sequences preempted.");
  prompt_tokens_ = counter(n.prompt_tokens, "Prompt tokens processed.");
  generation_tokens_ = counter(n.generation_tokens, "Tokens generated.");
  ttft_ = histogram(n.time_to_first_token, "Time to first token.", kTtftBuckets);
  itl_ = histogram(n.inter_token_latency, "Time between streamed tokens.", kItlBuckets);
  e2e_ = histogram(n.e2e_request_latency, "Request latency, submit to finish.", kE2eBuckets);
  queue_time_ = histogram(n.request_queue_time, "Time waiting to be scheduled.", kTtftBuckets);
  batch_size_ = histogram(n.batch_size, "Sequences per engine step.", kBatchBuckets);
  batch_tokens_ = histogram(n.batch_tokens, "Tokens per engine step.", kBatchTokenBuckets);
  timeouts_ = counter(n.request_timeouts, "Requests ended by their deadline.");
  cancellations_ = counter(n.request_cancellations, "Requests cancelled (client disconnect, shutdown).");
  cache_hits_ = counter(n.result_cache_hits, "Requests served from the result cache.");
  cache_misses_ = counter(n.result_cache_misses, "Cacheable requests not found in the result cache.");
  fallbacks_ = counter(n.fallbacks, "Requests re-run on the fallback model after the primary failed.");
  success_family_ = &BuildCounter().Name(n.request_success).Help("Finished requests by finish reason.").Register(r);
  rejections_family_ =
      &BuildCounter().Name(n.request_rejections).Help("Requests refused before the engine, by reason.").Register(r);
  errors_family_ = &BuildCounter().Name(n.http_errors).Help("Error responses by HTTP status code.").Register(r);
  spec_drafts_ = counter(n.spec_drafts, "Speculative verifications (one per sequence and step with a draft).");
  spec_draft_tokens_ = counter(n.spec_draft_tokens, "Draft tokens verified.");
  spec_accepted_tokens_ = counter(n.spec_accepted_tokens, "Draft tokens accepted.");
  spec_per_pos_family_ =
      &BuildCounter().Name(n.spec_accepted_per_pos).Help("Draft tokens accepted, by position in the draft.").Register(r);
  spec_acceptance_rate_ = gauge(n.spec_acceptance_rate, "Accepted / verified draft tokens since start.");
  spec_accepted_per_step_ =
      gauge(n.spec_accepted_per_step, "Draft tokens accepted per verification since start (each also adds one).");
  for (const char* reason : {"stop", "length", "timeout", "cancelled", "error"})
    success_family_->Add(labels({{"finished_reason", reason}}));
  for (const char* reason : {"rate_limit", "queue_full", "too_long", "unauthorized", "draining", "not_ready"})
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
  for (prometheus::Gauge* g : kv_usage_aliases_) g->Set(s.kv_usage());
  std::lock_guard lock(mutex_);
  auto advance = [](prometheus::Counter* c, uint64_t now, uint64_t& seen) {
    if (now > seen) c->Increment(double(now - seen));
    seen = now > seen ? now : seen;
  };
  advance(prefix_hits_, s.n_prefix_cache_hit_tokens, seen_prefix_hits_);
  advance(prefix_queries_, s.n_prefix_cache_query_tokens, seen_prefix_queries_);
  advance(preemptions_, s.n_preemptions, seen_preemptions_);
  advance(spec_drafts_, s.n_spec_drafts, seen_spec_drafts_);
  advance(spec_draft_tokens_, s.n_spec_draft_tokens, seen_spec_draft_tokens_);
  advance(spec_accepted_tokens_, s.n_spec_accepted_tokens, seen_spec_accepted_);
  for (size_t i = spec_per_pos_.size(); i < s.n_spec_accepted_per_pos.size(); ++i) {
    spec_per_pos_.push_back(&spec_per_pos_family_->Add(labels({{"position", std::to_string(i)}})));
    seen_spec_per_pos_.push_back(0);
  }
  for (size_t i = 0; i < s.n_spec_accepted_per_pos.size(); ++i)
    advance(spec_per_pos_[i], s.n_spec_accepted_per_pos[i], seen_spec_per_pos_[i]);
  spec_acceptance_rate_->Set(s.spec_acceptance());
  spec_accepted_per_step_->Set(s.n_spec_drafts ? double(s.n_spec_accepted_tokens) / double(s.n_spec_drafts) : 0.0);
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
