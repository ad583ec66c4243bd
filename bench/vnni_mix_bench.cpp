// What the instructions around vpdpbusd cost: a stream of 512-bit vpdpbusd (12 independent accumulators, the int8
// peak probe's shape) with one other instruction per four vpdpbusd, each line against the stream alone. The integer
// tiles (src/kernels/matmul_*_avx512.cpp) spend a few instructions per block beside their vpdpbusd: a vpmulld by a
// K-quant's sub-block scale, a vpmaddwd for an offset or mins, the float step's vcvtdq2ps, vmulps and FMA. Those that
// issue on the pipes vpdpbusd takes cost as much as a vpdpbusd each; the others come free while the multipliers are
// busy. The ratios say which is which on this CPU (on Zen 4, vpmulld, vpmaddwd, vmulps and FMAs cost a vpdpbusd
// each; adds, logic, shifts and conversions nothing: docs/performance.md).
// Run: vnni_mix_bench [runs]   (AVX-512 VNNI only; one thread, its CPU time, best of `runs`)
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "thread_cpu_time.h"

namespace {

enum class Extra { None, Mulld, Maddwd, Mulps, Fma, Add, Cvt, Shift, And, Mullw };

// The empty asm statements keep each value in a register and each instruction in the loop: without them the
// compiler may fold the chains or keep the accumulators in memory.
#define KEEP(v) asm volatile("" : "+v"(v))
#define DP(a) \
  a = _mm512_dpbusd_epi32(a, w, x); \
  KEEP(a);

template <Extra E>
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) double seconds_per_dpbusd(long iters, int seed) {
  const __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(5);
  __m512i a0 = _mm512_set1_epi32(seed), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0,
          a9 = a0, a10 = a0, a11 = a0;
  __m512i m0 = _mm512_set1_epi32(seed + 1), m1 = m0, m2 = m0;
  // One other instruction on m: the same for each of the three per iteration (a macro, so that it is compiled
  // inside this function's AVX-512 target).
#define EXTRA(m)                                                                                                     \
  if constexpr (E == Extra::Mulld) m = _mm512_mullo_epi32(m, w);                                                    \
  if constexpr (E == Extra::Maddwd) m = _mm512_madd_epi16(m, w);                                                    \
  if constexpr (E == Extra::Mulps)                                                                                  \
    m = _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(m), _mm512_castsi512_ps(w)));                         \
  if constexpr (E == Extra::Fma)                                                                                    \
    m = _mm512_castps_si512(_mm512_fmadd_ps(_mm512_castsi512_ps(m), _mm512_castsi512_ps(w), _mm512_castsi512_ps(x))); \
  if constexpr (E == Extra::Add) m = _mm512_add_epi32(m, w);                                                        \
  if constexpr (E == Extra::Cvt) m = _mm512_castps_si512(_mm512_cvtepi32_ps(m));                                   \
  if constexpr (E == Extra::Shift) m = _mm512_srai_epi32(m, 3);                                                     \
  if constexpr (E == Extra::And) m = _mm512_and_si512(m, w);                                                        \
  if constexpr (E == Extra::Mullw) m = _mm512_mullo_epi16(m, w);                                                    \
  if constexpr (E != Extra::None) KEEP(m);
  const double t0 = thread_cpu_seconds();
  for (long i = 0; i < iters; ++i) {
    DP(a0) DP(a1) DP(a2) DP(a3) EXTRA(m0)
    DP(a4) DP(a5) DP(a6) DP(a7) EXTRA(m1)
    DP(a8) DP(a9) DP(a10) DP(a11) EXTRA(m2)
  }
  const double t = thread_cpu_seconds() - t0;
  __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
                               _mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)));
  s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)));
  s = _mm512_add_epi32(s, _mm512_add_epi32(m0, _mm512_add_epi32(m1, m2)));
  volatile int sink = _mm512_reduce_add_epi32(s);
  (void)sink;
  return t / (double(iters) * 12.0);
#undef EXTRA
}

template <Extra E>
double best_of(int runs) {
  double best = 1e9;
  for (int r = 0; r < runs; ++r) best = std::min(best, seconds_per_dpbusd<E>(2'000'000, r));
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw")) {
    std::fprintf(stderr, "vnni_mix_bench: this CPU has no AVX-512 VNNI\n");
    return 1;
  }
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;
  const double alone = best_of<Extra::None>(runs);
  std::printf("vpdpbusd zmm alone: %.3f ns each, %.1f GOP/s on one thread\n", alone * 1e9, 128.0 / alone * 1e-9);
  const struct {
    const char* name;
    double (*run)(int);
  } lines[] = {{"vpmulld", best_of<Extra::Mulld>},   {"vpmaddwd", best_of<Extra::Maddwd>},
               {"vmulps", best_of<Extra::Mulps>},    {"vfmadd231ps", best_of<Extra::Fma>},
               {"vpmullw", best_of<Extra::Mullw>},   {"vpaddd", best_of<Extra::Add>},
               {"vcvtdq2ps", best_of<Extra::Cvt>},   {"vpsrad", best_of<Extra::Shift>},
               {"vpandd", best_of<Extra::And>}};
  std::printf("%-24s %10s %14s\n", "one per four vpdpbusd", "ns/vpdpbusd", "time vs alone");
  for (const auto& line : lines) {
    const double t = line.run(runs);
    std::printf("%-24s %10.3f %13.2fx\n", line.name, t * 1e9, t / alone);
  }
  return 0;
}
