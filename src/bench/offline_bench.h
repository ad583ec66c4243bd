// The batching benchmark: the same workload of N requests through each batching policy of one engine
// configuration, reporting throughput, latency, time to first token and peak KV memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"

namespace tessera {

struct OfflineBenchOptions {
  static EngineOptions sixteen_slots() {
    EngineOptions e;
    e.scheduling.max_seqs = 16;
    return e;
  }

  int n_requests = 64;
  int prompt_tokens = 128;
  int min_output_tokens = 32;   // output lengths are uniform in [min, max]
  int max_output_tokens = 256;
  uint64_t seed = 1;
  std::vector<SchedulingPolicy> modes = {SchedulingPolicy::Static, SchedulingPolicy::Window,
                                         SchedulingPolicy::Continuous};
  // Shared by every mode; `batching` is overridden per mode. 16 sequence slots for 64 requests by default, so
  // that static batching runs in waves held by their longest output and the comparison measures something
  // (with as many slots as requests, every mode does the same work).
  EngineOptions engine = sixteen_slots();
  // engine.speculative on: the policies run without it, and one more mode, "continuous+spec", runs continuous
  // batching with it on the same workload.
  int scaling_sequences = 32;   // the decode-scaling probe: this many sequences vs one
  int scaling_output_tokens = 64;
};

struct Percentiles {
  double mean = 0, p50 = 0, p99 = 0;
};

struct OfflineModeResult {
  std::string mode;
  int n_requests = 0;
  double seconds = 0;
  double requests_per_s = 0;
  double output_tokens_per_s = 0;
  int64_t output_tokens = 0;
  Percentiles latency_s;
  Percentiles ttft_s;
  uint64_t peak_kv_bytes = 0;        // blocks in use at the worst step
  uint64_t peak_kv_held_bytes = 0;   // token positions actually written at that step
  int64_t peak_running = 0;
  uint64_t contiguous_kv_bytes = 0;  // contiguous caches of the full context for the same number of sequences
  uint64_t preemptions = 0;
  uint64_t steps = 0;                // forward passes the engine ran
  // With speculative decoding (the mode "continuous+spec"): acceptance, tokens per verification, and the steps
  // where the cost model turned it off.
  double spec_acceptance = 0;
  double spec_tokens_per_verification = 0;
  uint64_t spec_drafts = 0;
  uint64_t spec_steps_off = 0;
};

struct DecodeScalingResult {
  int n_sequences = 0;
  double single_tokens_per_s = 0;   // one sequence decoding alone
  double batched_tokens_per_s = 0;  // n_sequences decoding together (aggregate)
  double speedup() const { return single_tokens_per_s > 0 ? batched_tokens_per_s / single_tokens_per_s : 0; }
};

// One workload (drawn from options.seed) run under every mode of options.modes.
struct OfflineBenchRun {
  std::vector<int> output_lengths;  // the workload's, in arrival order
  std::vector<OfflineModeResult> modes;
};

OfflineBenchRun run_offline_bench(const std::shared_ptr<const Model>& model, const OfflineBenchOptions& options);
DecodeScalingResult run_decode_scaling(const std::shared_ptr<const Model>& model, const OfflineBenchOptions& options);

}  // namespace tessera
