// Batched matmul against this machine's limits, measured in the same run: for each weight type and token
// count, best-of-N time of one 2048×5632 matmul (TinyLlama FFN shape, or TESSERA_BENCH_SHAPE), as GB/s of
// weights (decode) and GOP/s (2 ops per multiply-add), next to read bandwidth and the int8 peak (bench/roofline.h's
// probe, as `tessera bench` takes it: the kernels' byte dot product at the active ISA level, vpdpbusd zmm with
// AVX-512 VNNI, vpmaddubsw + vpmaddwd ymm on AVX2; this bench's own AVX2-only probe had read about a quarter of
// the VNNI peak, so %peak showed 200 %). Best-of-N rather than means: the machine is shared and noise only slows.
// Run: matmul_roofline_bench [reps] [types...]   e.g. matmul_roofline_bench 15 Q8_0 Q8_0x8 I8 INT4 INT4_G128 F16x32
// Types are timed interleaved (each repetition runs every type once), so their ratios compare like with like.
// BF16x32p: BF16 panels with bf16 products, the default for BF16 weights (activations rounded to bf16,
// vdpbf16ps; AVX-512 BF16 machines); BF16x32 is the exact fp32 path (--fp32-activations). F32x32 and FP8x32:
// F32 and FP8 E4M3 panels.
// TESSERA_BENCH_TOKENS=1,16,512 picks the token counts (default 1,4,16,32,128,512).
// TESSERA_BENCH_THREADS=1 times one thread by its CPU time, the steadier number on a busy machine.
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/roofline.h"
#include "core/cpu_features.h"
#include "core/huge_pages.h"
#include "core/tensor_type.h"
#include "core/thread_pool.h"
#include "kernels/interleave.h"
#include "kernels/lowbit.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "thread_cpu_time.h"

namespace tessera {
namespace {

// The shape: TinyLlama's FFN up/gate by default; TESSERA_BENCH_SHAPE=N_OUTxN_IN picks another (e.g. 2048x5632,
// the down projection).
int64_t kNIn = 2048, kNOut = 5632;

// With one thread everything runs on the calling thread, so its CPU time can stand in for wall time: it leaves
// out the slices other processes take on a loaded machine (cache pollution by them still counts).
bool g_cpu_clock = false;

double now_s() {
  if (g_cpu_clock) return thread_cpu_seconds();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Weights and probe buffers (free() them) in huge pages, as the model loader gives streamed weights
// (core/huge_pages.h); TESSERA_BENCH_SMALL_PAGES=1 keeps 4 KiB pages, for comparison. Exits when out of memory.
uint8_t* allocate_buffer(size_t n) {
  uint8_t* p = allocate_for_streaming(n);
  if (p == nullptr) {
    std::fprintf(stderr, "out of memory\n");
    std::exit(1);
  }
  if (std::getenv("TESSERA_BENCH_SMALL_PAGES") != nullptr) ::madvise(p, n, MADV_NOHUGEPAGE);
  return p;
}

// ---- probes (compiled for AVX2 by attribute: this file is built for the baseline ISA) ------------------------

__attribute__((target("avx2"))) uint64_t read_sum(const uint8_t* p, size_t n) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < n; i += 128) {
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
  return uint64_t(_mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 3));
}

double bandwidth_gbs(ThreadPool& pool, const std::vector<uint8_t*>& slices, size_t slice_bytes, int reps) {
  std::vector<uint64_t> sink(size_t(pool.size()) * 8);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    pool.run([&](int i, int) { sink[size_t(i) * 8] += read_sum(slices[size_t(i)], slice_bytes); });
    best = std::max(best, double(slice_bytes) * double(pool.size()) / (now_s() - t0) * 1e-9);
  }
  return best;
}

// ---- matmul ---------------------------------------------------------------------------------------------------

// Copies of the matrix, used in turn, so each call reads weights from memory, not from the 32 MiB L3.
struct Weights {
  std::string name;
  std::unique_ptr<uint8_t, decltype(&std::free)> data{nullptr, &std::free};
  std::vector<float> scales;
  std::vector<uint16_t> group_params;  // INT4: per copy, scales then zero points
  std::vector<WeightMatrix> views;
  size_t bytes = 0;  // one copy, INT4 group parameters included
};

// INT4 (group 32 or 128, rtn) or any GGUF/I8 type; with `interleaved`, rewritten as the model loader does
// (kernels/interleave.h): groups of 8 rows for the block types, panels of 32 rows for the float types.
Weights make_weights(TensorType type, int64_t group = 0, bool interleaved = false, bool bf16_products = false) {
  Weights w;
  w.name = type == TensorType::INT4 ? "INT4_G" + std::to_string(group) : std::string(tensor_type_name(type));
  if (interleaved) w.name += interleaved_layout(type) == WeightLayout::Panel32 ? "x32" : "x8";
  if (bf16_products) w.name += " bf16 products";
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> row(kNIn);
  const size_t row_bytes = type == TensorType::INT4 ? int4_row_bytes(kNIn) : tensor_row_bytes(type, kNIn);
  const size_t ng = type == TensorType::INT4 ? size_t(int4_n_groups(kNIn, group)) : 0;
  const size_t data_bytes = row_bytes * kNOut, param_count = 2 * ng * kNOut;
  w.bytes = data_bytes + param_count * 2;
  w.scales.resize(kNOut);
  // TESSERA_BENCH_HOT=1: one copy, so a matrix that fits the caches is timed without memory traffic.
  const bool hot = std::getenv("TESSERA_BENCH_HOT") != nullptr;
  const size_t copies = hot ? 1 : std::max<size_t>(2, (size_t{96} << 20) / w.bytes + 1);
  w.data.reset(allocate_buffer(data_bytes * copies));
  w.group_params.resize(param_count * copies);
  for (int64_t r = 0; r < kNOut; ++r) {
    for (auto& v : row) v = dist(rng);
    if (type == TensorType::INT4) {
      quantize_row_int4(row.data(), kNIn, group, w.data.get() + r * row_bytes, &w.group_params[r * ng],
                        &w.group_params[ng * kNOut + r * ng]);
    } else {
      quantize_row(type, row.data(), w.data.get() + r * row_bytes, kNIn, &w.scales[size_t(r)]);
    }
  }
  if (interleaved) interleave_rows(type, w.data.get(), kNOut, kNIn);
  if (bf16_products) pair_bf16_panels(w.data.get(), kNOut, kNIn);  // as the loader stores them
  for (size_t c = 0; c < copies; ++c) {
    if (c > 0) {
      std::memcpy(w.data.get() + c * data_bytes, w.data.get(), data_bytes);
      std::memcpy(w.group_params.data() + c * param_count, w.group_params.data(), param_count * 2);
    }
    WeightMatrix m{type, kNOut, kNIn, w.data.get() + c * data_bytes, row_bytes,
                   type == TensorType::I8 || type == TensorType::FP8_E4M3 ? w.scales.data() : nullptr};
    if (interleaved) m.layout = interleaved_layout(type);
    m.bf16_products = bf16_products;
    if (type == TensorType::INT4) {
      m.group_size = int32_t(group);
      m.group_scales = w.group_params.data() + c * param_count;
      m.group_zeros = m.group_scales + ng * kNOut;
    }
    w.views.push_back(m);
  }
  return w;
}

// One timed call on the next copy.
double time_once(const Weights& w, size_t& next, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  const double t0 = now_s();
  matmul(w.views[next++ % w.views.size()], x, n_tokens, y, pool);
  return now_s() - t0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;
  struct Spec {
    TensorType type;
    int64_t group = 0;
    bool interleaved = false;
    bool bf16_products = false;  // vdpbf16ps with bf16-rounded activations (AVX-512 BF16 only)
  };
  std::vector<Spec> types;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "INT4" || a == "INT4_G32") types.push_back({TensorType::INT4, 32});
    if (a == "INT4_G128") types.push_back({TensorType::INT4, 128});
    if (a == "Q4_0x8") types.push_back({TensorType::Q4_0, 0, true});
    if (a == "Q8_0x8") types.push_back({TensorType::Q8_0, 0, true});
    if (a == "I8x8") types.push_back({TensorType::I8, 0, true});
    if (a == "Q4_Kx8") types.push_back({TensorType::Q4_K, 0, true});
    if (a == "Q6_Kx8") types.push_back({TensorType::Q6_K, 0, true});
    if (a == "F16x32") types.push_back({TensorType::F16, 0, true});
    if (a == "BF16x32") types.push_back({TensorType::BF16, 0, true});
    if (a == "F32x32") types.push_back({TensorType::F32, 0, true});
    if (a == "FP8x32") types.push_back({TensorType::FP8_E4M3, 0, true});
    if (a == "BF16x32p") types.push_back({TensorType::BF16, 0, true, true});
    for (TensorType t : {TensorType::Q8_0, TensorType::I8, TensorType::Q4_0, TensorType::F16, TensorType::Q4_K,
                         TensorType::Q6_K})
      if (a == tensor_type_name(t)) types.push_back({t, 0});
  }
  if (types.empty()) types = {{TensorType::Q8_0}, {TensorType::I8}};
  if (const char* shape = std::getenv("TESSERA_BENCH_SHAPE")) {
    long long n_out = 0, n_in = 0;
    if (std::sscanf(shape, "%lldx%lld", &n_out, &n_in) != 2 || n_out < 1 || n_in < 32) {
      std::fprintf(stderr, "TESSERA_BENCH_SHAPE must be N_OUTxN_IN, e.g. 2048x5632\n");
      return 1;
    }
    kNOut = n_out;
    kNIn = n_in;
  }
  std::vector<int64_t> token_counts = {1, 4, 16, 32, 128, 512};
  if (const char* list = std::getenv("TESSERA_BENCH_TOKENS")) {
    token_counts.clear();
    if (*list == '\0') {
      std::fprintf(stderr, "TESSERA_BENCH_TOKENS is empty: give a comma-separated list of counts, e.g. 1,16,512\n");
      return 1;
    }
    for (const char* p = list; *p != '\0';) {
      char* end = nullptr;
      const long long n = std::strtoll(p, &end, 10);
      if (end == p || n < 1 || n > 4096 || (*end != ',' && *end != '\0')) {
        std::fprintf(stderr, "TESSERA_BENCH_TOKENS must be a comma-separated list of counts in [1, 4096], e.g. 1,16,512\n");
        return 1;
      }
      token_counts.push_back(n);
      p = *end == ',' ? end + 1 : end;
    }
  }
  const int n_threads = std::getenv("TESSERA_BENCH_THREADS") ? std::atoi(std::getenv("TESSERA_BENCH_THREADS")) : 2;
  ThreadPool pool(n_threads);
  g_cpu_clock = pool.size() == 1;
  if (kernel_isa(active_isa()) == Isa::Scalar) std::printf("warning: scalar ISA; probes still use AVX2\n");

  const size_t slice = size_t{64} << 20;  // per thread, 2× L3 in all
  std::vector<uint8_t*> slices;
  for (int i = 0; i < pool.size(); ++i) {
    slices.push_back(allocate_buffer(slice));
  }
  pool.run([&](int i, int) { std::memset(slices[size_t(i)], i + 1, slice); });

  std::printf("matmul %lldx%lld, %d threads, ISA %s, best of >=%d, %s\n", (long long)kNOut, (long long)kNIn,
              pool.size(), std::string(isa_name(kernel_isa(active_isa()))).c_str(), reps,
              g_cpu_clock ? "thread CPU time" : "wall time");
  std::vector<Weights> ws;
  for (const Spec& t : types) ws.push_back(make_weights(t.type, t.group, t.interleaved, t.bf16_products));
  double bw = bandwidth_gbs(pool, slices, slice, 5), peak = measure_int8_peak_gops(pool, 5);
  std::vector<std::vector<double>> best(ws.size(), std::vector<double>(token_counts.size(), 1e9));
  // Every repetition's time too: the median says what a model's sequence of products meets, where the best is
  // what the kernel can do in the host's quietest moment.
  std::vector<std::vector<std::vector<double>>> times(ws.size(), std::vector<std::vector<double>>(token_counts.size()));
  for (size_t k = 0; k < token_counts.size(); ++k) {
    const int64_t n = token_counts[k];
    std::vector<float> x(size_t(n * kNIn)), y(size_t(n * kNOut));
    std::mt19937 rng(2);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (auto& v : x) v = dist(rng);
    std::vector<size_t> next(ws.size(), 0);
    for (size_t i = 0; i < ws.size(); ++i) time_once(ws[i], next[i], x.data(), n, y.data(), pool);  // warm-up
    const int n_reps = n >= 128 ? reps / 3 + 1 : reps;
    std::vector<double> spent(ws.size(), 0.0);
    for (int r = 0; r < n_reps || *std::min_element(spent.begin(), spent.end()) < 0.2; ++r) {
      for (size_t i = 0; i < ws.size(); ++i) {
        const double dt = time_once(ws[i], next[i], x.data(), n, y.data(), pool);
        best[i][k] = std::min(best[i][k], dt);
        times[i][k].push_back(dt);
        spent[i] += dt;
      }
    }
  }
  bw = std::max(bw, bandwidth_gbs(pool, slices, slice, 5));
  peak = std::max(peak, measure_int8_peak_gops(pool, 5));
  std::printf("read bandwidth %.1f GB/s, int8 peak %.0f GOP/s (%s, better of before and after)\n", bw, peak,
              std::string(int8_peak_instruction()).c_str());
  for (size_t i = 0; i < ws.size(); ++i) {
    std::printf("\n%s: %.2f MB weights\n", ws[i].name.c_str(), double(ws[i].bytes) / 1e6);
    const std::string per_first = "t/t(" + std::to_string(token_counts[0]) + "tok)";
    std::printf("%8s %10s %9s %8s %9s %8s %12s %10s %10s\n", "n_tok", "us", "GB/s", "%bw", "GOP/s", "%peak",
                per_first.c_str(), "median us", i ? "vs first" : "");
    for (size_t k = 0; k < token_counts.size(); ++k) {
      const double sec = best[i][k], n = double(token_counts[k]);
      const double gbs = double(ws[i].bytes) / sec * 1e-9, gops = 2.0 * kNIn * kNOut * n / sec * 1e-9;
      std::vector<double>& all = times[i][k];
      std::nth_element(all.begin(), all.begin() + all.size() / 2, all.end());
      std::printf("%8lld %10.1f %9.1f %7.0f%% %9.1f %7.0f%% %12.2f %10.1f", (long long)token_counts[k], sec * 1e6, gbs,
                  100 * gbs / bw, gops, 100 * gops / peak, sec / best[i][0], all[all.size() / 2] * 1e6);
      if (i) std::printf(" %9.2fx", best[0][k] / sec);
      std::printf("\n");
    }
  }
  for (uint8_t* p : slices) std::free(p);
  return 0;
}
