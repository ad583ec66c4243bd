// `tessera bench --offline`: the batching comparison (static / window / continuous) on one model.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>

#include "bench/offline_bench.h"
#include "spec_flags.h"

namespace tessera {

struct OfflineBenchCli {
  bool enabled = false;
  OfflineBenchOptions bench;
  uint64_t kv_cache_mb = 0;
  SpecFlags spec;  // adds the mode continuous+spec
  LoadOptions load;
  bool ignore_memory_check = false;
};

// Registers --offline and the workload/engine flags on the bench subcommand.
void add_offline_bench_options(CLI::App* cmd, OfflineBenchCli& o);
// Runs the comparison and prints a table (or one JSON document with an object per mode). The engines' KV cache
// is fitted to `available_bytes` as serve fits it (0: no check). Returns the exit code.
int run_offline_bench_cli(const std::shared_ptr<const Model>& model, OfflineBenchCli o, int threads, bool json,
                          uint64_t available_bytes);

}  // namespace tessera
