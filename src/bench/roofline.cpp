// Probe timing and ISA dispatch. Compute probes calibrate their iteration count until one run takes ~20 ms,
// long enough to hide the pool's wake-up and short enough to repeat.
#include "bench/roofline.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include <fmt/format.h>

#include "bench/roofline_kernels.h"
#include "core/huge_pages.h"

namespace tessera {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Plain C++ versions for Isa::Scalar (TESSERA_ISA=scalar or a CPU without AVX2).
uint64_t read_sum_scalar(const uint8_t* p, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < n; i += 32) {
    uint64_t w[4];
    std::memcpy(w, p + i, 32);
    s0 += w[0], s1 += w[1], s2 += w[2], s3 += w[3];
  }
  return s0 + s1 + s2 + s3;
}

constexpr int kScalarChains = 8;

float fma_chains_scalar(int64_t iters) {
  float acc[kScalarChains];
  for (int k = 0; k < kScalarChains; ++k) acc[k] = float(k);
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < kScalarChains; ++k) acc[k] = acc[k] * 0.999f + 1e-4f;
  }
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

int32_t int8_chains_scalar(int64_t iters) {
  int32_t acc[kScalarChains] = {};
  int8_t u = 3, s = -2;
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile("" : "+r"(u), "+r"(s));
    for (int k = 0; k < kScalarChains; ++k) acc[k] += int32_t(u) * int32_t(s + k);
  }
  int32_t t = 0;
  for (int32_t a : acc) t += a;
  return t;
}

Isa probe_isa() { return kernel_isa(active_isa()); }

// Runs body(iters) on every thread; returns the best rate in units of `ops_per_iter` per second, scaled by 1e-9.
template <typename Body>
double best_rate_g(ThreadPool& pool, int reps, double ops_per_iter, Body body) {
  std::vector<int64_t> sinks(size_t(pool.size()) * 8, 0);  // one cache line per thread
  auto run_once = [&](int64_t iters) {
    const double start = now_seconds();
    pool.run([&](int index, int) { sinks[size_t(index) * 8] += int64_t(body(iters)); });
    return now_seconds() - start;
  };
  int64_t iters = 1 << 12;
  for (double t = run_once(iters); t < 0.02; t = run_once(iters)) {
    iters = t < 0.002 ? iters * 8 : int64_t(double(iters) * 0.025 / t) + 1;
  }
  double best = 0.0;
  for (int r = 0; r < std::max(1, reps); ++r) {
    best = std::max(best, ops_per_iter * double(iters) * double(pool.size()) / run_once(iters) * 1e-9);
  }
  volatile int64_t keep = 0;
  for (int64_t s : sinks) keep = keep + s;
  return best;
}

}  // namespace

ReadBandwidthProbe::ReadBandwidthProbe(ThreadPool& pool, size_t bytes) : pool_(pool) {
  // Slices are whole 2 MiB pages so that each page is first touched (and placed) by the thread reading it.
  // The buffer asks for huge pages, as the model's streamed weights do (core/huge_pages.h): the probe reads
  // memory the way the kernels can at best, not slower for want of TLB reach.
  const size_t unit = kHugePageBytes * size_t(pool.size());
  bytes_ = std::max(unit, (bytes + unit - 1) / unit * unit);
  data_ = allocate_for_streaming(bytes_);
  if (data_ == nullptr) throw std::bad_alloc();
  pool_.run([&](int index, int count) {
    const size_t slice = bytes_ / size_t(count);
    std::memset(data_ + slice * size_t(index), index + 1, slice);
  });
}

ReadBandwidthProbe::~ReadBandwidthProbe() { std::free(data_); }

double ReadBandwidthProbe::measure_gbs(int reps) {
  const bool avx2 = probe_isa() != Isa::Scalar;
  std::vector<uint64_t> sinks(size_t(pool_.size()) * 8, 0);
  double best = 0.0;
  for (int r = 0; r < std::max(1, reps); ++r) {
    const double start = now_seconds();
    pool_.run([&](int index, int count) {
      const size_t slice = bytes_ / size_t(count);
      const uint8_t* p = data_ + slice * size_t(index);
      sinks[size_t(index) * 8] += avx2 ? roofline::read_sum_avx2(p, slice) : read_sum_scalar(p, slice);
    });
    best = std::max(best, double(bytes_) / (now_seconds() - start) * 1e-9);
  }
  for (uint64_t s : sinks) sink_ += s;
  return best;
}

double measure_fp32_peak_gflops(ThreadPool& pool, int reps) {
  if (probe_isa() == Isa::Scalar) {
    return best_rate_g(pool, reps, 2.0 * kScalarChains, [](int64_t n) { return fma_chains_scalar(n); });
  }
  if (probe_isa() == Isa::Avx512Vnni) {
    return best_rate_g(pool, reps, 2.0 * 16 * roofline::kFmaChains,
                       [](int64_t n) { return roofline::fma_chains_avx512(n); });
  }
  return best_rate_g(pool, reps, 2.0 * 8 * roofline::kFmaChains,
                     [](int64_t n) { return roofline::fma_chains_avx2(n); });
}

bool has_bf16_peak() { return active_isa() >= Isa::Avx512Bf16; }

double measure_bf16_peak_gflops(ThreadPool& pool, int reps) {
  if (!has_bf16_peak()) return 0.0;
  return best_rate_g(pool, reps, 2.0 * 32 * roofline::kBf16Chains, [](int64_t n) { return roofline::bf16_chains(n); });
}

bool has_tile_peaks() { return active_isa() >= Isa::Amx; }

double measure_int8_tile_peak_gops(ThreadPool& pool, int reps) {
  if (!has_tile_peaks()) return 0.0;
  return best_rate_g(pool, reps, 2.0 * roofline::amx::kTileProducts * roofline::amx::kTileMultiplies,
                     [](int64_t n) { return roofline::amx::int8_tiles(n); });
}

double measure_bf16_tile_peak_gflops(ThreadPool& pool, int reps) {
  if (!has_tile_peaks()) return 0.0;
  return best_rate_g(pool, reps, 2.0 * roofline::amx::kBf16TileProducts * roofline::amx::kTileMultiplies,
                     [](int64_t n) { return roofline::amx::bf16_tiles(n); });
}

double measure_int8_peak_gops(ThreadPool& pool, int reps) {
  switch (probe_isa()) {
    case Isa::Scalar:
      return best_rate_g(pool, reps, 2.0 * kScalarChains, [](int64_t n) { return int8_chains_scalar(n); });
    case Isa::Avx512Vnni:
    case Isa::Avx512Bf16:
      return best_rate_g(pool, reps, 2.0 * 64 * roofline::kInt8ChainsVnni,
                         [](int64_t n) { return roofline::int8_chains_vnni(n); });
    default:
      return best_rate_g(pool, reps, 2.0 * 32 * roofline::kInt8ChainsAvx2,
                         [](int64_t n) { return roofline::int8_chains_avx2(n); });
  }
}

double measure_int8_product_peak_gops(ThreadPool& pool, int reps) {
  if (probe_isa() != Isa::Avx2) return measure_int8_peak_gops(pool, reps);
  return best_rate_g(pool, reps, 2.0 * 32 * roofline::kInt8ProductChainsAvx2,
                     [](int64_t n) { return roofline::int8_product_chains_avx2(n); });
}

double ProbeSeries::best() const { return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end()); }

std::string ProbeSeries::listed() const {
  std::string out = fmt::format("{} probe{}:", values.size(), values.size() == 1 ? "" : "s");
  for (size_t i = 0; i < values.size(); ++i) out += fmt::format("{} {:.1f}", i == 0 ? "" : ",", values[i]);
  return out;
}

const char* compute_peak_name(ComputePeak peak) {
  switch (peak) {
    case ComputePeak::Int8: return "int8";
    case ComputePeak::Int8Tiles: return "int8 tile";
    case ComputePeak::Bf16: return "bf16";
    case ComputePeak::Bf16Tiles: return "bf16 tile";
    case ComputePeak::Fp32: return "fp32";
  }
  return "fp32";
}

bool is_int8_peak(ComputePeak peak) { return peak == ComputePeak::Int8 || peak == ComputePeak::Int8Tiles; }

double PeakProbes::best(ComputePeak peak) const {
  switch (peak) {
    case ComputePeak::Int8: return int8_gops.best();
    case ComputePeak::Int8Tiles: return int8_tile_gops.best();
    case ComputePeak::Bf16: return bf16_gflops.best();
    case ComputePeak::Bf16Tiles: return bf16_tile_gflops.best();
    case ComputePeak::Fp32: return fp32_gflops.best();
  }
  return fp32_gflops.best();
}

void PeakProbes::measure(ThreadPool& pool, int reps) {
  fp32_gflops.values.push_back(measure_fp32_peak_gflops(pool, reps));
  int8_gops.values.push_back(measure_int8_peak_gops(pool, reps));
  int8_product_gops.values.push_back(measure_int8_product_peak_gops(pool, reps));
  if (has_bf16_peak()) bf16_gflops.values.push_back(measure_bf16_peak_gflops(pool, reps));
  if (has_tile_peaks()) {
    int8_tile_gops.values.push_back(measure_int8_tile_peak_gops(pool, reps));
    bf16_tile_gflops.values.push_back(measure_bf16_tile_peak_gflops(pool, reps));
  }
}

std::string_view fp32_peak_instruction() {
  switch (probe_isa()) {
    case Isa::Scalar: return "scalar mulss+addss";
    case Isa::Avx512Vnni: return "vfmadd231ps zmm";
    default: return "vfmadd231ps ymm";
  }
}

std::string_view int8_peak_instruction() {
  switch (probe_isa()) {
    case Isa::Scalar: return "scalar imul";
    case Isa::Avx512Vnni:
    case Isa::Avx512Bf16: return "vpdpbusd zmm";
    default: return "vpmaddubsw+vpmaddwd ymm";
  }
}

}  // namespace tessera
