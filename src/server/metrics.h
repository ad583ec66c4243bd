// Prometheus metrics (text format, seconds for histograms). The metrics vLLM exports too follow its names and
// buckets (`tessera_` in place of `vllm:`, or vLLM's exact names with the prefix `vllm:`: metric_names.h); the
// gateway's own counters (rejections, timeouts, cancellations, result-cache hits, fallbacks, errors by status)
// come on top. Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "server/metric_names.h"

namespace tessera::server {

class Metrics {
 public:
  // `prefix`: see metric_names.h; throws tessera::Error for a prefix that cannot start a metric name.
  explicit Metrics(const std::string& model_name, std::string_view prefix = kDefaultMetricsPrefix);

  // Engine-side gauges and the counters the engine keeps as totals; called just before a scrape.
  void update_engine(const EngineStats& stats);
  void observe_step(const StepStats& step);
  // A finished request (engine stats) and its outcome.
  void observe_request(const RequestStats& stats, FinishReason reason);
  void observe_inter_token(double seconds);

  void count_rejection(const std::string& reason);  // "rate_limit", "queue_full", "too_long", ...
  void count_status(int http_status);
  void count_timeout() { timeouts_->Increment(); }
  void count_cancellation() { cancellations_->Increment(); }
  void count_cache_hit() { cache_hits_->Increment(); }
  void count_cache_miss() { cache_misses_->Increment(); }
  void count_fallback() { fallbacks_->Increment(); }
  void set_ready(bool ready) { ready_->Set(ready ? 1.0 : 0.0); }

  // The Prometheus text exposition of everything registered.
  std::string serialize() const;

 private:
  prometheus::Labels labels(std::initializer_list<std::pair<const std::string, std::string>> extra = {}) const;

  std::string model_name_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* waiting_;
  prometheus::Gauge* running_;
  prometheus::Gauge* kv_usage_;
  std::vector<prometheus::Gauge*> kv_usage_aliases_;
  prometheus::Gauge* ready_;
  prometheus::Counter* prefix_hits_;
  prometheus::Counter* prefix_queries_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* generation_tokens_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* itl_;
  prometheus::Histogram* e2e_;
  prometheus::Histogram* queue_time_;
  prometheus::Histogram* batch_size_;
  prometheus::Histogram* batch_tokens_;
  prometheus::Counter* timeouts_;
  prometheus::Counter* cancellations_;
  prometheus::Counter* cache_hits_;
  prometheus::Counter* cache_misses_;
  prometheus::Counter* fallbacks_;
  prometheus::Family<prometheus::Counter>* success_family_;
  prometheus::Family<prometheus::Counter>* rejections_family_;
  prometheus::Family<prometheus::Counter>* errors_family_;
  prometheus::Counter* spec_drafts_;
  prometheus::Counter* spec_draft_tokens_;
  prometheus::Counter* spec_accepted_tokens_;
  prometheus::Family<prometheus::Counter>* spec_per_pos_family_;
  std::vector<prometheus::Counter*> spec_per_pos_;  // by draft position, added as the engine reports them
  prometheus::Gauge* spec_acceptance_rate_;
  prometheus::Gauge* spec_accepted_per_step_;

  std::mutex mutex_;  // guards the engine totals last seen (counters only move forward by deltas)
  uint64_t seen_prefix_hits_ = 0, seen_prefix_queries_ = 0, seen_preemptions_ = 0;
  uint64_t seen_spec_drafts_ = 0, seen_spec_draft_tokens_ = 0, seen_spec_accepted_ = 0;
  std::vector<uint64_t> seen_spec_per_pos_;
};

}  // namespace tessera::server
