// This machine's limits, measured in-process with the instructions the kernels use: memory read bandwidth,
// peak fp32 FMA rate and peak int8 dot-product rate, all threads of a pool at once. Benchmarks divide what a
// model achieves by these to say how close to the hardware it runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace tessera {

// Reads a buffer several times the size of the last-level cache with wide loads, one slice per thread.
// Bandwidth drifts on shared machines, so a benchmark keeps one probe and measures again around its run.
class ReadBandwidthProbe {
 public:
  // Allocates `bytes` (rounded to a multiple of 4 KiB) and touches every page from the thread that reads it.
  ReadBandwidthProbe(ThreadPool& pool, size_t bytes);
  ~ReadBandwidthProbe();
  ReadBandwidthProbe(const ReadBandwidthProbe&) = delete;
  ReadBandwidthProbe& operator=(const ReadBandwidthProbe&) = delete;

  // Best of `reps` full passes, in GB/s (1e9 bytes per second).
  double measure_gbs(int reps);
  size_t bytes() const { return bytes_; }

 private:
  ThreadPool& pool_;
  size_t bytes_;
  uint8_t* data_;
  uint64_t sink_ = 0;  // keeps the reads observable
};

// Peaks are probed with the widest vectors the kernels at the active ISA level may use: 256-bit on AVX2,
// 512-bit with AVX-512 (where a core with a full 512-bit datapath doubles the rate); at Isa::Amx, also the AMX
// tiles' int8 rate, the limit of the products that take them.

// Peak fp32 multiply-add rate in GFLOP/s (2 flops per lane per FMA), best of `reps` runs of ~20 ms each:
// independent FMA chains held in registers.
double measure_fp32_peak_gflops(ThreadPool& pool, int reps);

// Peak int8 dot-product rate in GOP/s (2 ops per byte product): vpmaddubsw + vpmaddwd on AVX2, 512-bit
// vpdpbusd with AVX-512 VNNI.
double measure_int8_peak_gops(ThreadPool& pool, int reps);

// Whether the active level has AMX tiles (Isa::Amx: AMX-INT8 and AMX-BF16 both), whose peaks are probed then. The
// AMX-INT8 peak in GOP/s (tdpbssd on full 16 × 64 tiles, 2 × 2 blocked) is the limit of the int8 products that take
// them (ComputePeak::Int8Tiles); the AMX-BF16 peak in GFLOP/s (tdpbf16ps, 16 × 16 × 32 products each) that of the
// bf16 products that take them (ComputePeak::Bf16Tiles). 0 without tiles.
bool has_tile_peaks();
double measure_int8_tile_peak_gops(ThreadPool& pool, int reps);
double measure_bf16_tile_peak_gflops(ThreadPool& pool, int reps);

// Whether the active level has bf16 dot products (AVX-512 BF16), and their peak in GFLOP/s (512-bit
// vdpbf16ps: 2 flops per bf16 product); 0 without them.
bool has_bf16_peak();
double measure_bf16_peak_gflops(ThreadPool& pool, int reps);

// The instructions the fp32 and int8 probes time at the active ISA level, with their width, for reports.
std::string_view fp32_peak_instruction();
std::string_view int8_peak_instruction();

// The byte-product rate alone, in GOP/s: vpmaddubsw with its int16 pair sums added in int16 and never widened
// on AVX2. No exact signed int8 dot product reaches it there (the sums must widen to int32, and a signed × signed
// product needs a sign step first); reported beside the int8 peak so both yardsticks are visible. With VNNI (one
// instruction multiplies and accumulates) and in scalar code it equals measure_int8_peak_gops.
double measure_int8_product_peak_gops(ThreadPool& pool, int reps);

// One limit probed several times over a benchmark run. The best probe is the limit: on a shared machine other
// work only ever slows a probe down, and a low denominator would flatter every ratio taken against it.
struct ProbeSeries {
  std::vector<double> values;
  double best() const;
  // "3 probes: 201.3, 385.0, 380.2", for reports.
  std::string listed() const;
};

// Which compute peak a workload runs against: int8 dot products (vector or AMX tiles), bf16 dot products (vector
// or AMX tiles) or fp32 FMA.
enum class ComputePeak { Int8, Int8Tiles, Bf16, Bf16Tiles, Fp32 };
const char* compute_peak_name(ComputePeak peak);  // "int8", "int8 tile", "bf16", "bf16 tile", "fp32"
// Whether the peak counts int8 operations (GOP/s) rather than floating-point ones (GFLOP/s).
bool is_int8_peak(ComputePeak peak);

// The compute peaks, probed together each time measure() runs.
struct PeakProbes {
  ProbeSeries fp32_gflops, int8_gops, int8_product_gops;
  ProbeSeries bf16_gflops;     // empty without AVX-512 BF16
  ProbeSeries int8_tile_gops;    // empty below Isa::Amx
  ProbeSeries bf16_tile_gflops;  // empty below Isa::Amx
  void measure(ThreadPool& pool, int reps);
  double best(ComputePeak peak) const;  // the best probe of that peak
};

}  // namespace tessera
