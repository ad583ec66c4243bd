// `tessera bench`: this machine's limits (bandwidth, fp32 and int8 peaks) and a model's prefill and decode
// throughput measured in the same run, with the ratios between them and the resident-memory check.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/batching_bound.h"
#include "bench/model_bench.h"
#include "bench/process_memory.h"
#include "bench/roofline.h"
#include "commands.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/weight_types.h"
#include "core/thread_pool.h"
#include "core/kv_type.h"
#include "engine/kv_sizing.h"
#include "model/model.h"
#include "bench_offline.h"
#include "bench_spec_cost.h"
#include "model/presets.h"
#include "model/synthetic.h"

namespace tessera {
namespace {

struct BenchOptions {
  std::string model_path;
  std::string preset;
  std::string type;
  uint64_t seed = 1;
  int64_t group = 32;  // INT4 with --preset
  int threads = 0;
  LoadOptions load;
  KvType kv_type = KvType::F16;
  bool json = false;
  bool quick = false;
  bool spec_cost_only = false;  // --spec-cost: only the verification cost table
  bool ignore_memory_check = false;
  std::vector<int64_t> decode_depths;  // --decode-depth: batch-1 decode after this many positions
  OfflineBenchCli offline;
};

constexpr int64_t kPrefillLengths[] = {128, 512};
constexpr int64_t kDecodeBatches[] = {1, 4, 16, 32};
constexpr int64_t kDecodePrompt = 32;  // the short prefill before decode steps
// Contexts --decode-depth may ask for when the model does not say how long its own is: the KV cache of a deeper
// one would not fit most machines beside the weights.
constexpr int64_t kMaxDepthWithoutContext = 32768;

// Fails unless batch-1 decode `steps` steps after `depth` positions stays within the model's context, and its KV
// cache fits beside the weights (available_bytes: memory_for_check's; 0 skips that check).
void check_decode_depth(const Model& model, int64_t depth, int64_t steps, KvType kv_type, uint64_t available_bytes) {
  const int64_t n_ctx = model.config().n_ctx_train;
  const int64_t limit = n_ctx > 0 ? n_ctx : kMaxDepthWithoutContext;
  if (depth + 1 + steps > limit) {
    fail("--decode-depth {}: with the {} positions of the decode steps it exceeds {} ({})", depth, 1 + steps, limit,
         n_ctx > 0 ? "the model's context" : "the limit for a model that does not give its context");
  }
  require_kv_cache_fits_in_memory(model, kv_cache_bytes_for_context(model.config(), depth + 1 + steps, kv_type),
                                  available_bytes, fmt::format("--decode-depth {}", depth));
}

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

void progress(const std::string& what) { std::fprintf(stderr, "bench: %s\n", what.c_str()); }

struct LoadedModel {
  std::shared_ptr<Model> model;
  std::string name;
  TensorType type = TensorType::F32;
  uint64_t tensor_bytes = 0, file_bytes = 0;
};

// The model under test: a GGUF file (mmapped) or a preset with random weights built in memory.
LoadedModel load_bench_model(const BenchOptions& o, ThreadPool& pool) {
  LoadedModel m;
  if (!o.model_path.empty()) {
    progress("loading " + o.model_path);
    m.model = load_model_or_embedded(o.model_path, o.load, o.ignore_memory_check);
    m.name = o.model_path.substr(o.model_path.find_last_of('/') + 1);
    for (const auto& t : m.model->file()->tensors()) m.tensor_bytes += t.n_bytes;
    m.file_bytes = m.model->file()->file_size();
    // The file's type (--bf16-products rounds F16 matrices to BF16 in memory).
    const gguf::TensorInfo* gate = m.model->file()->find_tensor("blk.0.ffn_gate.weight");
    m.type = gate != nullptr ? gate->type : m.model->weights().layers.at(0).w_gate.type;
    return m;
  }
  const ModelPreset* preset = find_model_preset(o.preset);
  if (preset == nullptr) fail("unknown preset '{}' (known: {})", o.preset, model_preset_names());
  const std::optional<TensorType> t = weight_type_from_name(o.type);
  if (!t) fail("unknown weight type '{}' ({})", o.type, weight_type_names());
  const SyntheticPlan plan = plan_synthetic_model(*preset, *t, o.seed, o.group);
  for (const std::string& note : plan.notes) std::fprintf(stderr, "bench: %s\n", note.c_str());
  progress(fmt::format("building {} {} with random weights in memory", preset->name, tensor_type_name(*t)));
  m.model = make_synthetic_model(*preset, plan, pool, o.load);
  note_unused_load_options(*m.model, o.load);
  m.name = std::string(preset->name) + " (synthetic weights)";
  m.tensor_bytes = plan.n_bytes();
  m.type = *t;
  return m;
}

// --offline: the batching policies compared on one workload through the real engine.
int bench_offline(const BenchOptions& o) {
  if (o.model_path.empty() == o.preset.empty()) fail("give either -m MODEL or --preset NAME --type TYPE");
  ThreadPool pool(o.threads);
  const LoadedModel loaded = load_bench_model(o, pool);
  OfflineBenchCli offline = o.offline;
  offline.bench.engine.kv_type = o.kv_type;
  offline.load = o.load;
  offline.ignore_memory_check = o.ignore_memory_check;
  return run_offline_bench_cli(loaded.model, offline, o.threads > 0 ? o.threads : ThreadPool::physical_core_count(),
                               o.json, memory_for_check(o.ignore_memory_check));
}

// --spec-cost: the verification cost table alone (a minute, not the whole roofline run).
int bench_spec_cost(const BenchOptions& o) {
  ThreadPool pool(o.threads);
  const LoadedModel loaded = load_bench_model(o, pool);
  const SpecCostReport r = measure_spec_cost(loaded.model, pool, o.kv_type, o.quick);
  if (o.json) {
    std::printf("%s\n", r.json().dump(2).c_str());
    return 0;
  }
  std::printf("model      %s, %d threads, %s kernels\n\n", loaded.name.c_str(), pool.size(),
              std::string(isa_name(kernel_isa(active_isa()))).c_str());
  r.print();
  return 0;
}

int bench(const BenchOptions& o) {
  if (o.model_path.empty() == o.preset.empty()) fail("give either -m MODEL or --preset NAME --type TYPE");
  if (o.spec_cost_only) return bench_spec_cost(o);
  ThreadPool pool(o.threads);
  const int peak_reps = o.quick ? 2 : 3;
  PeakProbes peaks;
  progress("measuring fp32 and int8 peaks");
  peaks.measure(pool, peak_reps);

  // Resident memory: an mmapped file's pages are counted in its mapping's address range once read (after a
  // warm-up step that reads every weight), pages rewritten for the kernels included; weights built in memory
  // (a preset, a converted folder) are anonymous memory from the moment they are built.
  const ProcessMemory before_load = read_process_memory();
  const LoadedModel loaded = load_bench_model(o, pool);
  const std::shared_ptr<Model>& model = loaded.model;
  const std::string& name = loaded.name;
  const TensorType type = loaded.type;
  const uint64_t tensor_bytes = loaded.tensor_bytes, file_bytes = loaded.file_bytes;
  const ProcessMemory after_load = read_process_memory();
  const int64_t batch1_steps = o.quick ? 4 : 16;
  const uint64_t available_bytes = memory_for_check(o.ignore_memory_check);
  for (int64_t depth : o.decode_depths) check_decode_depth(*model, depth, batch1_steps, o.kv_type, available_bytes);
  measure_decode(model, pool, 1, 1, 1, o.kv_type);  // touches every weight once
  const ProcessMemory warm = read_process_memory();
  const gguf::File* file = model->file();
  const uint64_t resident_weights = file != nullptr && file->is_mapped() ? resident_bytes_of_mapping(file->bytes())
                                                                         : after_load.rss_anon - before_load.rss_anon;

  std::map<int64_t, ThroughputMeasurement> prefill, decode;
  // The compute peaks drift like bandwidth: probed again right before and right after the prefills they are
  // compared with, and the best of all probes is the peak (a slow probe would flatter the ratio).
  progress("measuring fp32 and int8 peaks again");
  peaks.measure(pool, peak_reps);
  for (int64_t n : kPrefillLengths) {
    progress(fmt::format("prefill {} tokens", n));
    prefill[n] = measure_prefill(model, pool, n, o.quick ? 1 : 2, o.kv_type);
  }
  progress("measuring fp32 and int8 peaks again");
  peaks.measure(pool, peak_reps);
  const double fp32_peak = peaks.fp32_gflops.best(), int8_peak = peaks.int8_gops.best();
  const double int8_product_peak = peaks.int8_product_gops.best();
  progress("measuring memory bandwidth");
  ReadBandwidthProbe probe(pool, o.quick ? (size_t(256) << 20) : (size_t(1) << 30));
  const int bw_reps = o.quick ? 3 : 5;
  // Bandwidth drifts on shared machines: measured right before and right after the batch-1 decode that is
  // compared with it.
  const double bw_before = probe.measure_gbs(bw_reps);
  double bw_after = 0.0;
  for (int64_t b : kDecodeBatches) {
    progress(fmt::format("decode batch {}", b));
    const int64_t steps = b == 1 ? batch1_steps : o.quick ? 2 : b <= 4 ? 8 : b <= 16 ? 6 : 4;
    decode[b] = measure_decode(model, pool, b, kDecodePrompt, steps, o.kv_type);
    if (b == 1) bw_after = probe.measure_gbs(bw_reps);
  }
  std::map<int64_t, ThroughputMeasurement> decode_at_depth;
  for (int64_t depth : o.decode_depths) {
    progress(fmt::format("decode batch 1 after {} positions", depth));
    decode_at_depth[depth] = measure_decode(model, pool, 1, depth, batch1_steps, o.kv_type);
  }
  const double bandwidth = (bw_before + bw_after) / 2;
  const SpecCostReport spec_cost = measure_spec_cost(model, pool, o.kv_type, o.quick);

  const uint64_t weight_bytes = model->weight_bytes();
  const double decode_gbs = double(weight_bytes) * decode[1].tokens_per_s * 1e-9;
  const double prefill_gops = 2.0 * double(layer_matmul_elements(*model)) * prefill[512].tokens_per_s * 1e-9;
  // BF16 weights in panels (and F16 ones with --bf16-products) on a CPU with AVX-512 BF16 multiply at the bf16
  // dot-product rate (at the AMX level the AMX-BF16 tiles'), unless --fp32-activations.
  const ComputePeak compute_peak = compute_peak_of(*model);
  const bool int8 = is_int8_peak(compute_peak);
  const bool bf16 = compute_peak == ComputePeak::Bf16 || compute_peak == ComputePeak::Bf16Tiles;
  const double peak = peaks.best(compute_peak);
  const char* peak_kind = compute_peak_name(compute_peak);
  const double bandwidth_ratio = decode_gbs / bandwidth;
  const double peak_ratio = prefill_gops / peak;
  const double speedup16 = decode[16].tokens_per_s / decode[1].tokens_per_s;
  // What the roofline allows at batch 16: a step streams the weights once (bandwidth) and does 16 tokens of
  // multiply-adds (peak); the speedup over batch 1 cannot exceed their ratio.
  const RooflineStepCost step_cost = roofline_step_cost(*model, bandwidth, peak);
  const double speedup16_bound = 16.0 * step_cost.floor_seconds / step_cost.step_seconds(16, 16);
  const double resident_ratio = double(resident_weights) / double(tensor_bytes);
  const double bandwidth_target = int8 ? 0.80 : 0.70;  // fp16/bf16/f32 kernels also convert every weight

  nlohmann::ordered_json r;
  r["model"] = name;
  r["type"] = std::string(tensor_type_name(type));
  r["threads"] = pool.size();
  r["kv_type"] = kv_type_name(o.kv_type);
  if (o.load.int8_threshold > 0.0f) r["int8_threshold"] = o.load.int8_threshold;
  if (bf16) r["bf16_products"] = true;
  r["isa"] = std::string(isa_name(kernel_isa(active_isa())));
  r["amx_int8_tiles"] = compute_peak == ComputePeak::Int8Tiles;  // batches on AMX tiles (kernels/matmul_i8_amx.cpp)
  r["amx_bf16_tiles"] = compute_peak == ComputePeak::Bf16Tiles;  // every product on them (matmul_bf16_amx.cpp)
  r["cpu"] = cpu_model_name();
  r["bandwidth_gbs"] = bandwidth;
  r["bandwidth_before_gbs"] = bw_before;
  r["bandwidth_after_gbs"] = bw_after;
  r["bandwidth_buffer_bytes"] = probe.bytes();
  r["fp32_peak_gflops"] = fp32_peak;
  r["fp32_peak_probes_gflops"] = peaks.fp32_gflops.values;
  r["fp32_peak_instruction"] = std::string(fp32_peak_instruction());
  if (has_bf16_peak()) {
    r["bf16_peak_gflops"] = peaks.bf16_gflops.best();
    r["bf16_peak_probes_gflops"] = peaks.bf16_gflops.values;
    r["bf16_peak_instruction"] = "vdpbf16ps zmm";
  }
  r["int8_peak_gops"] = int8_peak;
  r["int8_peak_probes_gops"] = peaks.int8_gops.values;
  r["int8_peak_instruction"] = std::string(int8_peak_instruction());
  if (has_tile_peaks()) {
    r["int8_tile_peak_gops"] = peaks.int8_tile_gops.best();
    r["int8_tile_peak_probes_gops"] = peaks.int8_tile_gops.values;
    r["int8_tile_peak_instruction"] = "tdpbssd (AMX tiles)";
    r["bf16_tile_peak_gflops"] = peaks.bf16_tile_gflops.best();
    r["bf16_tile_peak_probes_gflops"] = peaks.bf16_tile_gflops.values;
    r["bf16_tile_peak_instruction"] = "tdpbf16ps (AMX tiles)";
  }
  r["int8_product_peak_gops"] = int8_product_peak;
  r["int8_product_peak_probes_gops"] = peaks.int8_product_gops.values;
  for (int64_t n : kPrefillLengths) r["prefill_tokens_per_s"][std::to_string(n)] = prefill[n].tokens_per_s;
  for (int64_t b : kDecodeBatches) r["decode_tokens_per_s"][std::to_string(b)] = decode[b].tokens_per_s;
  for (const auto& [depth, m] : decode_at_depth) r["decode_at_depth_tokens_per_s"][std::to_string(depth)] = m.tokens_per_s;
  r["decode_bandwidth_ratio"] = bandwidth_ratio;
  r["decode_weight_gbs"] = decode_gbs;
  r["prefill_peak_ratio"] = peak_ratio;
  r["prefill_gops"] = prefill_gops;
  r["prefill_peak_kind"] = peak_kind;
  r["prefill_product_peak_ratio"] = prefill_gops / (compute_peak == ComputePeak::Int8 ? int8_product_peak : peak);
  r["batch16_speedup"] = speedup16;
  r["batch16_speedup_roofline_bound"] = speedup16_bound;
  r["batch16_bound_ratio"] = speedup16 / speedup16_bound;
  r["spec_verify_cost"] = spec_cost.json();
  r["weight_bytes_per_token"] = weight_bytes;
  r["file_tensor_bytes"] = tensor_bytes;
  if (file_bytes > 0) r["file_bytes"] = file_bytes;
  r["rss_after_load_bytes"] = after_load.rss;
  r["rss_after_warmup_bytes"] = warm.rss;
  r["resident_weight_bytes"] = resident_weights;
  r["resident_weight_ratio"] = resident_ratio;
  r["targets"] = {
      {"decode_bandwidth", bandwidth_ratio >= bandwidth_target},
      {"prefill_peak", int8 ? nlohmann::ordered_json(peak_ratio >= 0.5) : nlohmann::ordered_json(nullptr)},
      {"batch16_speedup", speedup16 >= 5.0},
      {"batch16_bound", speedup16 >= 0.6 * speedup16_bound},
      {"resident_weights", resident_ratio <= 1.05},
  };

  if (o.json) {
    std::printf("%s\n", r.dump(2).c_str());
    return 0;
  }
  const auto gib = [](uint64_t b) { return double(b) / double(1ULL << 30); };
  const auto yes = [](bool b) { return b ? "met" : "NOT met"; };
  std::printf("model      %s, %s weights, %s KV cache, %d threads, %s kernels%s\n", name.c_str(),
              std::string(tensor_type_name(type)).c_str(), kv_type_name(o.kv_type), pool.size(),
              std::string(isa_name(kernel_isa(active_isa()))).c_str(),
              compute_peak == ComputePeak::Int8Tiles   ? " (batches on AMX-INT8 tiles)"
              : compute_peak == ComputePeak::Bf16Tiles ? " (bf16 products on AMX-BF16 tiles)"
                                                       : "");
  std::printf("cpu        %s\n\n", cpu_model_name().c_str());
  std::printf("%-34s %12s\n", "machine limit (measured now)", "value");
  std::printf("%-34s %9.1f GB/s   (before %.1f, after %.1f; %.0f MiB buffer)\n", "memory read bandwidth",
              bandwidth, bw_before, bw_after, double(probe.bytes()) / double(1 << 20));
  std::printf("%-34s %9.1f GFLOP/s (%s; best of %s)\n", "fp32 FMA peak", fp32_peak,
              std::string(fp32_peak_instruction()).c_str(), peaks.fp32_gflops.listed().c_str());
  if (has_bf16_peak()) {
    std::printf("%-34s %9.1f GFLOP/s (vdpbf16ps zmm; best of %s)\n", "bf16 dot-product peak",
                peaks.bf16_gflops.best(), peaks.bf16_gflops.listed().c_str());
  }
  std::printf("%-34s %9.1f GOP/s  (%s; best of %s)\n", "int8 dot-product peak", int8_peak,
              std::string(int8_peak_instruction()).c_str(), peaks.int8_gops.listed().c_str());
  std::printf("%-34s %9.1f GOP/s  (the multiply alone: no exact int8 dot product reaches it without VNNI)\n",
              "int8 byte-product peak", int8_product_peak);
  if (has_tile_peaks()) {
    std::printf("%-34s %9.1f GOP/s  (tdpbssd, AMX tiles: the limit of the products that take them; best of %s)\n",
                "int8 tile peak", peaks.int8_tile_gops.best(), peaks.int8_tile_gops.listed().c_str());
    std::printf("%-34s %9.1f GFLOP/s (tdpbf16ps, AMX tiles: the limit of the products that take them; best of %s)\n",
                "bf16 tile peak", peaks.bf16_tile_gflops.best(), peaks.bf16_tile_gflops.listed().c_str());
  }
  std::printf("\n");
  std::printf("%-34s %12s %s\n", "throughput", "tokens/s", "roofline");
  for (int64_t n : kPrefillLengths) {
    const double gops = 2.0 * double(layer_matmul_elements(*model)) * prefill[n].tokens_per_s * 1e-9;
    std::printf("%-34s %12.1f %.1f GOP/s = %.0f%% of %s peak", fmt::format("prefill {} tokens", n).c_str(),
                prefill[n].tokens_per_s, gops, 100 * gops / peak, peak_kind);
    if (compute_peak == ComputePeak::Int8) std::printf(", %.0f%% of byte-product peak", 100 * gops / int8_product_peak);
    std::printf("\n");
  }
  for (int64_t b : kDecodeBatches) {
    const double gbs = double(weight_bytes) * decode[b].tokens_per_s / double(b) * 1e-9;
    std::printf("%-34s %12.1f %.1f GB/s of weights = %.0f%% of bandwidth\n",
                fmt::format("decode batch {}", b).c_str(), decode[b].tokens_per_s, gbs, 100 * gbs / bandwidth);
  }
  for (const auto& [depth, m] : decode_at_depth) {
    std::printf("%-34s %12.1f (%.0f%% of batch 1 after %lld)\n", fmt::format("decode batch 1 after {}", depth).c_str(),
                m.tokens_per_s, 100 * m.tokens_per_s / decode[1].tokens_per_s, (long long)kDecodePrompt);
  }
  std::printf("%-34s %11.1fx (roofline bound %.1fx: %.0f%% of it)\n\n", "batch-16 speedup over batch 1", speedup16,
              speedup16_bound, 100 * speedup16 / speedup16_bound);
  spec_cost.print();
  std::printf("\n");
  std::printf("%-34s %9.3f GiB\n", "weights read per decode step", gib(weight_bytes));
  std::printf("%-34s %9.3f GiB\n", "tensor bytes (file)", gib(tensor_bytes));
  std::printf("%-34s %9.3f GiB\n", "VmRSS after load", gib(after_load.rss));
  std::printf("%-34s %9.3f GiB (%.1f%% of tensor bytes)\n\n", "resident weights after warm-up",
              gib(resident_weights), 100 * resident_ratio);
  std::printf("targets: decode >= %.0f%% of bandwidth: %s; ", 100 * bandwidth_target, yes(bandwidth_ratio >= bandwidth_target));
  if (int8) std::printf("prefill >= 50%% of %s peak: %s; ", peak_kind, yes(peak_ratio >= 0.5));
  std::printf("batch-16 >= 5x batch-1: %s; batch-16 >= 60%% of its bound: %s; resident weights <= tensor bytes + 5%%: %s\n",
              yes(speedup16 >= 5.0), yes(speedup16 >= 0.6 * speedup16_bound), yes(resident_ratio <= 1.05));
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, CommandAction& action) {
  auto* cmd = app.add_subcommand("bench", "Measure this machine's limits and a model's prefill/decode throughput");
  auto o = std::make_shared<BenchOptions>();
  auto* model = cmd->add_option("-m,--model", o->model_path, "GGUF model file or Hugging Face folder");
  add_memory_check_flag(cmd, o->ignore_memory_check);
  auto* preset = cmd->add_option("--preset", o->preset, "random in-memory (synthetic) weights at this shape: " +
                                                            model_preset_names());
  cmd->add_option("--type", o->type, "weight type with --preset: " + weight_type_names())
      ->needs(preset);
  cmd->add_option("--group", o->group, "INT4 group size with --preset --type int4: 32 or 128")->capture_default_str();
  add_bf16_products_options(cmd, o->load.bf16_products);
  add_int8_threshold_option(cmd, o->load.int8_threshold);
  model->excludes(preset);
  cmd->add_option("--seed", o->seed, "random seed of the synthetic weights")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical cores)")->check(CLI::Range(0, 1024));
  add_kv_type_option(cmd, "--kv-type", o->kv_type, "KV cache type: " + kv_type_names() + " (default f16)");
  cmd->add_flag("--json", o->json, "print one JSON object instead of the table");
  cmd->add_flag("--quick", o->quick, "fewer repetitions and a smaller bandwidth buffer");
  cmd->add_option("--decode-depth", o->decode_depths,
                  "also batch-1 decode after this many positions of context (comma-separated for several, e.g. "
                  "512,2048): attention's share of a step grows with the context")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_flag("--spec-cost", o->spec_cost_only,
                "only the speculative verification cost: a step of k = 1, 2, 4, 8 draft tokens / a decode step");
  add_offline_bench_options(cmd, o->offline);
  add_bench_serve_subcommand(cmd, action);
  cmd->callback([&action, o] {
    action = [o] {
      if (!o->preset.empty() && o->type.empty()) fail("--preset needs --type");
      return o->offline.enabled ? bench_offline(*o) : bench(*o);
    };
  });
}

}  // namespace tessera
