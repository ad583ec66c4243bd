// Flags and report of the batching benchmark.
#include "bench_offline.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <utility>
#include <vector>

#include "bench/batching_bound.h"
#include "bench/model_bench.h"
#include "bench/roofline.h"
#include "commands.h"

namespace tessera {
namespace {

// This machine's limits, probed before and after the runs: the best probe is the limit (other work on a shared
// machine only slows a probe down).
struct MachineLimits {
  PeakProbes peaks;
  ProbeSeries bandwidth_gbs;

  void probe(int threads) {
    ThreadPool pool(threads);
    peaks.measure(pool, 3);
    ReadBandwidthProbe probe(pool, size_t(1) << 30);
    bandwidth_gbs.values.push_back(probe.measure_gbs(5));
  }
};

// The workload's static and continuous schedules at the roofline of those limits.
struct RooflineComparison {
  double bandwidth_gbs = 0, peak_gops = 0;
  ComputePeak peak = ComputePeak::Fp32;
  PolicySchedule static_schedule, continuous_schedule;
  double ratio() const { return static_schedule.seconds / continuous_schedule.seconds; }
  double steps_ratio() const { return double(static_schedule.steps) / double(continuous_schedule.steps); }
};

RooflineComparison roofline_comparison(const Model& model, const OfflineBenchOptions& b, std::vector<int> output_lengths,
                                       const MachineLimits& limits) {
  RooflineComparison r;
  r.bandwidth_gbs = limits.bandwidth_gbs.best();
  r.peak = compute_peak_of(model);
  r.peak_gops = limits.peaks.best(r.peak);
  const RooflineStepCost cost = roofline_step_cost(model, r.bandwidth_gbs, r.peak_gops);
  const BatchingWorkload w{.prompt_tokens = b.prompt_tokens,
                           .output_tokens = std::move(output_lengths),
                           .max_seqs = b.engine.scheduling.max_seqs,
                           .max_batched_tokens = b.engine.scheduling.max_batched_tokens,
                           .n_ctx = b.engine.n_ctx > 0 ? b.engine.n_ctx : model.config().n_ctx_train};
  r.static_schedule = schedule_workload(SchedulingPolicy::Static, w, cost);
  r.continuous_schedule = schedule_workload(SchedulingPolicy::Continuous, w, cost);
  return r;
}

}  // namespace

void add_offline_bench_options(CLI::App* cmd, OfflineBenchCli& o) {
  cmd->add_flag("--offline", o.enabled, "compare batching policies on a batch of requests instead of kernel speeds");
  cmd->add_option("--requests", o.bench.n_requests, "--offline: number of requests")->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--prompt-tokens", o.bench.prompt_tokens, "--offline: prompt length")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--min-output", o.bench.min_output_tokens, "--offline: shortest output")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-output", o.bench.max_output_tokens, "--offline: longest output")->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-seqs", o.bench.engine.scheduling.max_seqs, "--offline: sequences per step (static batch size)")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--max-batched-tokens", o.bench.engine.scheduling.max_batched_tokens, "--offline: tokens per step")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--preferred-batch", o.bench.engine.scheduling.batch_size, "--offline: window batch size")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--max-wait-ms", o.bench.engine.scheduling.max_wait_ms, "--offline: window length")
      ->capture_default_str()
      ->check(CLI::Range(0, 600000));
  cmd->add_option("--kv-block-size", o.bench.engine.kv_block_size, "--offline: KV block size")->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--kv-cache-mb", o.kv_cache_mb, "--offline: KV cache size (0: derived)");
  cmd->add_option("--scaling-seqs", o.bench.scaling_sequences, "--offline: sequences of the decode-scaling probe")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  add_spec_options(cmd, o.spec);
}

int run_offline_bench_cli(const std::shared_ptr<const Model>& model, OfflineBenchCli o, int threads, bool json,
                          uint64_t available_bytes) {
  OfflineBenchOptions& b = o.bench;
  if (b.min_output_tokens > b.max_output_tokens) {
    std::fprintf(stderr, "error: --min-output is larger than --max-output\n");
    return 1;
  }
  b.engine.threads = threads;
  b.engine.speculative = speculative_from_flags(o.spec, *model, o.load, o.ignore_memory_check);
  b.engine.kv_cache_bytes = o.kv_cache_mb << 20;
  fit_engine_kv_cache(*model, b.engine, available_bytes, fmt::format("--kv-cache-mb {}", o.kv_cache_mb));
  // The pool as blocks: with a draft model a cache size covers both caches, so the modes without speculation
  // would otherwise get more target blocks from the same bytes than the one with it, and compare unevenly.
  b.engine.kv_blocks = engine_kv_blocks(model->config(), b.engine);
  b.engine.scheduling.batch_size = std::min(b.engine.scheduling.batch_size, b.engine.scheduling.max_seqs);
  if (!json) {
    std::printf("offline batching benchmark: %s, %d requests, prompt %d, output %d-%d, max_seqs %lld, "
                "max_batched_tokens %lld\n",
                model->name().c_str(), b.n_requests, b.prompt_tokens, b.min_output_tokens, b.max_output_tokens,
                (long long)b.engine.scheduling.max_seqs, (long long)b.engine.scheduling.max_batched_tokens);
    std::fflush(stdout);
  }
  MachineLimits limits;
  limits.probe(threads);
  const OfflineBenchRun run = run_offline_bench(model, b);
  const std::vector<OfflineModeResult>& results = run.modes;
  const DecodeScalingResult scaling = run_decode_scaling(model, b);
  limits.probe(threads);

  const OfflineModeResult* stat = nullptr;
  const OfflineModeResult* cont = nullptr;
  for (const auto& r : results) {
    if (r.mode == "static") stat = &r;
    if (r.mode == "continuous") cont = &r;
  }
  const double speedup = stat && cont && stat->output_tokens_per_s > 0
                             ? cont->output_tokens_per_s / stat->output_tokens_per_s : 0.0;
  const RooflineComparison roofline = roofline_comparison(*model, b, run.output_lengths, limits);
  if (json) {
    nlohmann::json doc;
    doc["model"] = model->name();
    doc["requests"] = b.n_requests;
    doc["prompt_tokens"] = b.prompt_tokens;
    doc["output_tokens_range"] = {b.min_output_tokens, b.max_output_tokens};
    doc["max_seqs"] = b.engine.scheduling.max_seqs;
    doc["max_batched_tokens"] = b.engine.scheduling.max_batched_tokens;
    doc["threads"] = threads;
    for (const auto& r : results) {
      doc["modes"].push_back({{"mode", r.mode},
                              {"requests_per_s", r.requests_per_s},
                              {"output_tokens_per_s", r.output_tokens_per_s},
                              {"output_tokens", r.output_tokens},
                              {"seconds", r.seconds},
                              {"latency_mean_s", r.latency_s.mean},
                              {"latency_p50_s", r.latency_s.p50},
                              {"latency_p99_s", r.latency_s.p99},
                              {"ttft_mean_s", r.ttft_s.mean},
                              {"ttft_p50_s", r.ttft_s.p50},
                              {"ttft_p99_s", r.ttft_s.p99},
                              {"peak_kv_bytes", r.peak_kv_bytes},
                              {"peak_kv_held_bytes", r.peak_kv_held_bytes},
                              {"peak_running", r.peak_running},
                              {"contiguous_kv_bytes", r.contiguous_kv_bytes},
                              {"preemptions", r.preemptions},
                              {"steps", r.steps},
                              {"spec_acceptance", r.spec_acceptance},
                              {"spec_tokens_per_verification", r.spec_tokens_per_verification},
                              {"spec_drafts", r.spec_drafts},
                              {"spec_steps_off", r.spec_steps_off}});
    }
    doc["continuous_vs_static_output_tokens"] = speedup;
    doc["roofline"] = {{"bandwidth_gbs", roofline.bandwidth_gbs},
                       {"peak_gops", roofline.peak_gops},
                       {"peak_kind", compute_peak_name(roofline.peak)},
                       {"static_seconds", roofline.static_schedule.seconds},
                       {"continuous_seconds", roofline.continuous_schedule.seconds},
                       {"continuous_vs_static", roofline.ratio()},
                       {"static_steps", roofline.static_schedule.steps},
                       {"continuous_steps", roofline.continuous_schedule.steps},
                       {"continuous_vs_static_steps", roofline.steps_ratio()}};
    doc["decode_scaling"] = {{"sequences", scaling.n_sequences},
                             {"single_tokens_per_s", scaling.single_tokens_per_s},
                             {"batched_tokens_per_s", scaling.batched_tokens_per_s},
                             {"speedup", scaling.speedup()}};
    std::printf("%s\n", doc.dump(2).c_str());
    return 0;
  }
  std::printf("\n%-15s %9s %10s %9s %9s %9s %9s %9s %11s %11s %11s %7s\n", "mode", "req/s", "out tok/s", "lat mean",
              "lat p50", "lat p99", "ttft p50", "ttft p99", "peak KV MB", "held KV MB", "contig. MB", "steps");
  for (const auto& r : results) {
    std::printf("%-15s %9.2f %10.1f %8.2fs %8.2fs %8.2fs %8.2fs %8.2fs %11.1f %11.1f %11.1f %7llu\n", r.mode.c_str(),
                r.requests_per_s, r.output_tokens_per_s, r.latency_s.mean, r.latency_s.p50, r.latency_s.p99,
                r.ttft_s.p50, r.ttft_s.p99, double(r.peak_kv_bytes) / 1048576.0,
                double(r.peak_kv_held_bytes) / 1048576.0, double(r.contiguous_kv_bytes) / 1048576.0,
                (unsigned long long)r.steps);
  }
  std::printf("\ncontinuous / static output tokens/s: %.2fx (target >= 1.5x)\n", speedup);
  std::printf("the same workload at this machine's roofline (a step: max(weights at %.1f GB/s, tokens at %.0f %s/s)): "
              "static %.3g s, continuous %.3g s: %.2fx; with compute free, %lld against %lld weight reads: %.2fx\n",
              roofline.bandwidth_gbs, roofline.peak_gops, is_int8_peak(roofline.peak) ? "GOP" : "GFLOP",
              roofline.static_schedule.seconds, roofline.continuous_schedule.seconds, roofline.ratio(),
              (long long)roofline.static_schedule.steps, (long long)roofline.continuous_schedule.steps,
              roofline.steps_ratio());
  for (const auto& r : results) {
    if (r.mode != "continuous+spec" || cont == nullptr) continue;
    std::printf("speculative (%s, k=%lld): %.3fx the output tokens/s of continuous without it (target >= 0.95x); "
                "acceptance %.3f, %.2f tokens per verification, %llu verifications, %llu steps switched off\n",
                spec_method_name(b.engine.speculative.method), (long long)b.engine.speculative.spec_tokens,
                r.output_tokens_per_s / cont->output_tokens_per_s, r.spec_acceptance, r.spec_tokens_per_verification,
                (unsigned long long)r.spec_drafts, (unsigned long long)r.spec_steps_off);
  }
  std::printf("decode scaling: 1 sequence %.1f tok/s, %d sequences %.1f tok/s aggregate: %.2fx (target >= 6x)\n",
              scaling.single_tokens_per_s, scaling.n_sequences, scaling.batched_tokens_per_s, scaling.speedup());
  return 0;
}

}  // namespace tessera
