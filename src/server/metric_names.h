// The names /metrics exports. `tessera_` (the default) passes `promtool check metrics` cleanly: its lint
// reserves colons for recording rules. `vllm:` gives vLLM's exact names to every metric vLLM exports too, so
// that dashboards, alerts and autoscalers written for vLLM read a Tessera fleet unchanged; what vLLM has no
// metric for (the gateway's counters, readiness, sequences per step) keeps its `tessera_` name rather than a
// made-up `vllm:` one. Any other prefix replaces `tessera_` in front of Tessera's names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

inline constexpr std::string_view kDefaultMetricsPrefix = "tessera_";
inline constexpr std::string_view kVllmMetricsPrefix = "vllm:";

struct MetricNames {
  // Gauges.
  std::string num_requests_waiting, num_requests_running, kv_cache_usage, ready;
  // Older names of the KV usage gauge that dashboards still query (vLLM's V0 `gpu_cache_usage_perc`); each is
  // exported with the same value.
  std::vector<std::string> kv_cache_usage_aliases;
  // Counters (with their `_total`).
  std::string prefix_cache_hits, prefix_cache_queries, preemptions, prompt_tokens, generation_tokens;
  std::string request_success, request_timeouts, request_cancellations, result_cache_hits, result_cache_misses;
  std::string fallbacks, request_rejections, http_errors;
  // Speculative decoding: vLLM's spec_decode counters (verifications, draft tokens, accepted tokens, accepted
  // tokens by draft position) and its V0 acceptance-rate gauge; accepted tokens per verification is Tessera's.
  std::string spec_drafts, spec_draft_tokens, spec_accepted_tokens, spec_accepted_per_pos;
  std::string spec_acceptance_rate, spec_accepted_per_step;
  // Histograms.
  std::string time_to_first_token, inter_token_latency, e2e_request_latency, request_queue_time;
  std::string batch_size, batch_tokens;
};

// Empty when `prefix` can start a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), else what is wrong.
std::string metrics_prefix_problem(std::string_view prefix);

// The names under `prefix`; throws tessera::Error when metrics_prefix_problem() finds one.
MetricNames metric_names(std::string_view prefix);

}  // namespace tessera::server
