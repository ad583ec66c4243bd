// Batched matmul against this machine's limits, measured in the same run: for each weight type and token
// count, best-of-N time of one 2048×5632 matmul (TinyLlama FFN shape), as GB/s of weights (decode) and GOP/s
// (2 ops per multiply-add), next to read bandwidth and the int8 peak (vpmaddubsw + vpmaddwd + vpaddd chains,
// the kernels' byte dot product). Best-of-N rather than means: the machine is shared and noise only slows.
// Run: matmul_roofline_bench [reps] [types...]   e.g. matmul_roofline_bench 15 Q8_0 I8
// TESSERA_BENCH_THREADS=1 times one thread by its CPU time, the steadier number on a busy machine.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/tensor_type.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace tessera {
namespace {

constexpr int64_t kNIn = 2048, kNOut = 5632;

// With one thread everything runs on the calling thread, so its CPU time can stand in for wall time: it leaves
// out the slices other processes take on a loaded machine (cache pollution by them still counts).
bool g_cpu_clock = false;

double now_s() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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

// Eight independent maddubs → madd → add chains (only the add is loop-carried), 32 byte products each.
constexpr int kInt8Chains = 8;
__attribute__((target("avx2"))) int32_t int8_chains(int64_t iters) {
  __m256i u = _mm256_set1_epi8(3);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s[kInt8Chains], a[kInt8Chains];
  for (int k = 0; k < kInt8Chains; ++k) s[k] = _mm256_set1_epi8(int8_t(k - 4)), a[k] = _mm256_setzero_si256();
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile("" : "+x"(u));  // keeps the products inside the loop
#pragma GCC unroll 8
    for (int k = 0; k < kInt8Chains; ++k) a[k] = _mm256_add_epi32(a[k], _mm256_madd_epi16(_mm256_maddubs_epi16(u, s[k]), ones));
  }
  __m256i t = a[0];
  for (int k = 1; k < kInt8Chains; ++k) t = _mm256_add_epi32(t, a[k]);
  return _mm256_cvtsi256_si32(t);
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

double int8_peak_gops(ThreadPool& pool, int reps) {
  const int64_t iters = 200'000;  // ~0.5 ms: short runs are likelier to fit between other processes' slices
  std::vector<int64_t> sink(size_t(pool.size()) * 8);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    pool.run([&](int i, int) { sink[size_t(i) * 8] += int8_chains(iters); });
    best = std::max(best, 2.0 * 32 * kInt8Chains * double(iters) * pool.size() / (now_s() - t0) * 1e-9);
  }
  return best;
}

// ---- matmul ---------------------------------------------------------------------------------------------------

// Copies of the matrix, used in turn, so each call reads weights from memory, not from the 32 MiB L3.
struct Weights {
  std::vector<uint8_t> data;
  std::vector<float> scales;
  std::vector<WeightMatrix> views;
  size_t bytes = 0;
};

Weights make_weights(TensorType type) {
  Weights w;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> row(kNIn);
  const size_t row_bytes = tensor_row_bytes(type, kNIn);
  w.bytes = row_bytes * kNOut;
  w.scales.resize(kNOut);
  const size_t copies = std::max<size_t>(2, (size_t{96} << 20) / w.bytes + 1);
  w.data.resize(w.bytes * copies);
  for (int64_t r = 0; r < kNOut; ++r) {
    for (auto& v : row) v = dist(rng);
    quantize_row(type, row.data(), w.data.data() + r * row_bytes, kNIn, &w.scales[size_t(r)]);
  }
  for (size_t c = 0; c < copies; ++c) {
    if (c > 0) std::memcpy(w.data.data() + c * w.bytes, w.data.data(), w.bytes);
    w.views.push_back(WeightMatrix{type, kNOut, kNIn, w.data.data() + c * w.bytes, row_bytes,
                                   type == TensorType::I8 ? w.scales.data() : nullptr});
  }
  return w;
}

// Best seconds per matmul over `reps` calls (at least ~0.2 s of calls in all).
double time_matmul(const Weights& w, int64_t n_tokens, ThreadPool& pool, int reps) {
  std::vector<float> x(size_t(n_tokens * kNIn)), y(size_t(n_tokens * kNOut));
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  size_t next = 0;
  matmul(w.views[next++ % w.views.size()], x.data(), n_tokens, y.data(), pool);
  double best = 1e9, spent = 0;
  for (int r = 0; r < reps || spent < 0.2; ++r) {
    const double t0 = now_s();
    matmul(w.views[next++ % w.views.size()], x.data(), n_tokens, y.data(), pool);
    const double dt = now_s() - t0;
    best = std::min(best, dt);
    spent += dt;
  }
  return best;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;
  std::vector<TensorType> types;
  for (int i = 2; i < argc; ++i) {
    for (TensorType t : {TensorType::Q8_0, TensorType::I8, TensorType::Q4_0, TensorType::F16, TensorType::Q4_K,
                         TensorType::Q6_K})
      if (std::string(argv[i]) == tensor_type_name(t)) types.push_back(t);
  }
  if (types.empty()) types = {TensorType::Q8_0, TensorType::I8};
  const int n_threads = std::getenv("TESSERA_BENCH_THREADS") ? std::atoi(std::getenv("TESSERA_BENCH_THREADS")) : 2;
  ThreadPool pool(n_threads);
  g_cpu_clock = pool.size() == 1;
  if (kernel_isa(active_isa()) == Isa::Scalar) std::printf("warning: scalar ISA; probes still use AVX2\n");

  const size_t slice = size_t{64} << 20;  // per thread, 2× L3 in all
  std::vector<uint8_t*> slices;
  for (int i = 0; i < pool.size(); ++i) {
    slices.push_back(static_cast<uint8_t*>(std::aligned_alloc(4096, slice)));
  }
  pool.run([&](int i, int) { std::memset(slices[size_t(i)], i + 1, slice); });

  std::printf("matmul %lldx%lld, %d threads, ISA %s, best of >=%d, %s\n", (long long)kNOut, (long long)kNIn,
              pool.size(), std::string(isa_name(kernel_isa(active_isa()))).c_str(), reps,
              g_cpu_clock ? "thread CPU time" : "wall time");
  for (TensorType type : types) {
    const Weights w = make_weights(type);
    // Probes before and after each type's runs; the ratios use the better of the two.
    double bw = bandwidth_gbs(pool, slices, slice, 5), peak = int8_peak_gops(pool, 50);
    struct Row { int64_t n; double s; };
    std::vector<Row> rows;
    for (int64_t n : {1, 4, 16, 32, 128, 512}) rows.push_back({n, time_matmul(w, n, pool, n >= 128 ? reps / 3 + 1 : reps)});
    bw = std::max(bw, bandwidth_gbs(pool, slices, slice, 5));
    peak = std::max(peak, int8_peak_gops(pool, 50));
    const std::string name(tensor_type_name(type));
    std::printf("\n%s: %.2f MB weights; read bandwidth %.1f GB/s, int8 peak %.0f GOP/s\n", name.c_str(),
                double(w.bytes) / 1e6, bw, peak);
    std::printf("%8s %10s %9s %8s %9s %8s %12s\n", "n_tok", "us", "GB/s", "%bw", "GOP/s", "%peak", "t/t(1tok)");
    for (const Row& r : rows) {
      const double gbs = double(w.bytes) / r.s * 1e-9, gops = 2.0 * kNIn * kNOut * double(r.n) / r.s * 1e-9;
      std::printf("%8lld %10.1f %9.1f %7.0f%% %9.1f %7.0f%% %12.2f\n", (long long)r.n, r.s * 1e6, gbs, 100 * gbs / bw,
                  gops, 100 * gops / peak, r.s / rows[0].s);
    }
  }
  for (uint8_t* p : slices) std::free(p);
  return 0;
}
