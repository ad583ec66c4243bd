// Metric names per prefix, and vLLM's names for the metrics both servers export.
#include "server/metric_names.h"

#include "core/error.h"

namespace tessera::server {
namespace {

bool name_char(char c, bool first) {
  const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
  return letter || (!first && c >= '0' && c <= '9');
}

}  // namespace

std::string metrics_prefix_problem(std::string_view prefix) {
  if (prefix.empty()) return "the metrics prefix is empty (the default is 'tessera_')";
  for (size_t i = 0; i < prefix.size(); ++i)
    if (!name_char(prefix[i], i == 0))
      return "the metrics prefix '" + std::string(prefix) +
             "' is not the start of a Prometheus metric name: letters, digits, '_' and ':' only, not starting "
             "with a digit";
  return {};
}

MetricNames metric_names(std::string_view prefix) {
  if (std::string problem = metrics_prefix_problem(prefix); !problem.empty()) throw Error(problem);
  const bool vllm = prefix == kVllmMetricsPrefix;
  // A metric vLLM exports too: its vLLM name under `vllm:`, Tessera's name otherwise.
  auto shared = [&](std::string_view ours, std::string_view theirs) {
    return vllm ? std::string(kVllmMetricsPrefix).append(theirs) : std::string(prefix).append(ours);
  };
  // A metric of Tessera's own.
  auto own = [&](std::string_view ours) {
    return std::string(vllm ? kDefaultMetricsPrefix : prefix).append(ours);
  };
  MetricNames n;
  n.num_requests_waiting = shared("num_requests_waiting", "num_requests_waiting");
  n.num_requests_running = shared("num_requests_running", "num_requests_running");
  n.kv_cache_usage = shared("kv_cache_usage_perc", "kv_cache_usage_perc");
  if (vllm) n.kv_cache_usage_aliases.push_back("vllm:gpu_cache_usage_perc");
  n.ready = own("ready");
  n.prefix_cache_hits = shared("prefix_cache_hits_total", "prefix_cache_hits_total");
  n.prefix_cache_queries = shared("prefix_cache_queries_total", "prefix_cache_queries_total");
  n.preemptions = shared("num_preemptions_total", "num_preemptions_total");
  n.prompt_tokens = shared("prompt_tokens_total", "prompt_tokens_total");
  n.generation_tokens = shared("generation_tokens_total", "generation_tokens_total");
  n.request_success = shared("request_success_total", "request_success_total");
  n.request_timeouts = own("request_timeouts_total");
  n.request_cancellations = own("request_cancellations_total");
  n.result_cache_hits = own("result_cache_hits_total");
  n.result_cache_misses = own("result_cache_misses_total");
  n.fallbacks = own("fallbacks_total");
  n.request_rejections = own("request_rejections_total");
  n.http_errors = own("http_errors_total");
  n.spec_drafts = shared("spec_decode_num_drafts_total", "spec_decode_num_drafts_total");
  n.spec_draft_tokens = shared("spec_decode_num_draft_tokens_total", "spec_decode_num_draft_tokens_total");
  n.spec_accepted_tokens = shared("spec_decode_num_accepted_tokens_total", "spec_decode_num_accepted_tokens_total");
  n.spec_accepted_per_pos =
      shared("spec_decode_num_accepted_tokens_per_pos_total", "spec_decode_num_accepted_tokens_per_pos_total");
  n.spec_acceptance_rate = shared("spec_decode_draft_acceptance_rate", "spec_decode_draft_acceptance_rate");
  n.spec_accepted_per_step = own("spec_decode_accepted_tokens_per_step");
  n.time_to_first_token = shared("time_to_first_token_seconds", "time_to_first_token_seconds");
  n.inter_token_latency = shared("inter_token_latency_seconds", "inter_token_latency_seconds");
  n.e2e_request_latency = shared("e2e_request_latency_seconds", "e2e_request_latency_seconds");
  n.request_queue_time = shared("request_queue_time_seconds", "request_queue_time_seconds");
  n.batch_size = own("batch_size");
  // vLLM's histogram of tokens per engine step keeps the `_total` its name was given.
  n.batch_tokens = shared("batch_tokens", "iteration_tokens_total");
  return n;
}

}  // namespace tessera::server
