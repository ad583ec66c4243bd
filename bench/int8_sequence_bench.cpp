// What an exact signed int8 dot product costs on AVX2 without VNNI, next to the int8 peak probe's sequence.
// The probe (`tessera bench`, src/bench/roofline_avx2.cpp) times vpmaddubsw + vpmaddwd + vpaddd: unsigned × signed
// bytes. Q8_0 and INT8 weights meet signed activations, so their kernels (src/kernels/matmul_q8_0_inl.h,
// matmul_i8_inl.h) add a vpsignb per product (|w| · (x with w's sign)) and load a broadcast activation for each
// weight vector. Each line below times 8 independent chains of one sequence on one thread (its CPU time, best of
// many short runs) and prints GOP/s (2 ops per byte product) and the ratio to the probe's sequence, so the
// distance between the prefill ratio and 100 % can be split into what the instructions cost and what the kernel
// loses around them. Two more lines bound the alternatives: products of int16 copies (vpmaddwd alone, no
// vpsignb) and Q4_0's unsigned nibbles (vpmaddubsw summed in int16).
// Run: int8_sequence_bench [runs]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "thread_cpu_time.h"

namespace {

alignas(64) int8_t g_activations[4096];

// One iteration: the sequence for 8 independent accumulators (ymm0-7), 32 byte products each. ymm8 holds |w|,
// ymm9 w, ymm10 int16 ones, ymm11 a broadcast activation (for the sequence without a load); ymm12-15 are rotating
// temporaries. The whole timed loop is one asm statement, so the compiler can neither reorder, merge or hoist
// the instructions nor touch the registers between iterations.
#define STR(x) #x
#define CHAIN_PROBE(acc, tmp, off) \
  "vpmaddubsw %%ymm9, %%ymm8, %%" tmp "\n vpmaddwd %%ymm10, %%" tmp ", %%" tmp "\n vpaddd %%" tmp ", %%ymm" #acc ", %%ymm" #acc "\n"
#define CHAIN_LOAD(acc, tmp, off)                                                                                   \
  "vpbroadcastd " STR(off) "(%[x]), %%" tmp "\n vpmaddubsw %%" tmp ", %%ymm8, %%" tmp "\n vpmaddwd %%ymm10, %%" tmp \
  ", %%" tmp "\n vpaddd %%" tmp ", %%ymm" #acc ", %%ymm" #acc "\n"
#define CHAIN_SIGN(acc, tmp, off)                                                                                 \
  "vpsignb %%ymm9, %%ymm11, %%" tmp "\n vpmaddubsw %%" tmp ", %%ymm8, %%" tmp "\n vpmaddwd %%ymm10, %%" tmp ", %%" \
  tmp "\n vpaddd %%" tmp ", %%ymm" #acc ", %%ymm" #acc "\n"
#define CHAIN_KERNEL(acc, tmp, off)                                                                              \
  "vpbroadcastd " STR(off) "(%[x]), %%" tmp "\n vpsignb %%ymm9, %%" tmp ", %%" tmp "\n vpmaddubsw %%" tmp       \
  ", %%ymm8, %%" tmp "\n vpmaddwd %%ymm10, %%" tmp ", %%" tmp "\n vpaddd %%" tmp ", %%ymm" #acc ", %%ymm" #acc \
  "\n"
// The same 32 products as int16 pairs: weights widened to int16 beforehand (ymm8, ymm9: 16 values each) and
// activations broadcast as int16 pairs (ymm11), two vpmaddwd and two vpaddd, no vpsignb. An upper bound for
// kernels that would store int16 copies: the widening (vpmovsxbw) and the final pair sums are not counted.
#define CHAIN_INT16(acc, tmp, off)                                                                          \
  "vpmaddwd %%ymm11, %%ymm8, %%" tmp "\n vpaddd %%" tmp ", %%ymm" #acc ", %%ymm" #acc "\n vpmaddwd %%ymm11, " \
  "%%ymm9, %%" tmp "\n vpaddd %%" tmp ", %%ymm" #acc ", %%ymm" #acc "\n"
// Q4_0's inner step: unsigned 4-bit weights need no vpsignb and their pair sums fit int16, so 32 products are one
// vpmaddubsw and one vpaddw, with a broadcast activation load (the block's widening to int32 is not counted).
#define CHAIN_NIBBLE(acc, tmp, off)                                                                             \
  "vpbroadcastd " STR(off) "(%[x]), %%" tmp "\n vpmaddubsw %%" tmp ", %%ymm8, %%" tmp "\n vpaddw %%" tmp \
  ", %%ymm" #acc ", %%ymm" #acc "\n"
#define EIGHT(CHAIN)                                                                                              \
  CHAIN(0, "ymm12", 0) CHAIN(1, "ymm13", 4) CHAIN(2, "ymm14", 8) CHAIN(3, "ymm15", 12) CHAIN(4, "ymm12", 16) \
      CHAIN(5, "ymm13", 20) CHAIN(6, "ymm14", 24) CHAIN(7, "ymm15", 28)
#define CLOBBERS                                                                                                 \
  "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
      "xmm12", "xmm13", "xmm14", "xmm15"

// Operands: |w| bytes 3, w bytes -3 (so vpsignb flips every activation), int16 ones. The products' values do
// not matter for timing.
#define SETUP                                                                                              \
  "vpcmpeqw %%ymm10, %%ymm10, %%ymm10\n vpsrlw $15, %%ymm10, %%ymm10\n"                                      \
  "vpcmpeqb %%ymm8, %%ymm8, %%ymm8\n vpabsb %%ymm8, %%ymm8\n vpaddb %%ymm8, %%ymm8, %%ymm9\n"                \
  "vpaddb %%ymm9, %%ymm8, %%ymm8\n vpxor %%ymm9, %%ymm9, %%ymm9\n vpsubb %%ymm8, %%ymm9, %%ymm9\n"           \
  "vpbroadcastd (%[x]), %%ymm11\n vpxor %%ymm0, %%ymm0, %%ymm0\n vmovdqa %%ymm0, %%ymm1\n"                   \
  "vmovdqa %%ymm0, %%ymm2\n vmovdqa %%ymm0, %%ymm3\n vmovdqa %%ymm0, %%ymm4\n vmovdqa %%ymm0, %%ymm5\n"      \
  "vmovdqa %%ymm0, %%ymm6\n vmovdqa %%ymm0, %%ymm7\n"
#define TIMED_LOOP(CHAIN)                                                                              \
  asm volatile(SETUP "1:\n" EIGHT(CHAIN) "dec %[n]\n jnz 1b\n vzeroupper\n"                             \
               : [n] "+r"(iterations)                                                                   \
               : [x] "r"(x)                                                                             \
               : CLOBBERS, "cc")

template <int kSequence>
__attribute__((target("avx2"))) void run_sequence(int64_t iterations) {
  const int8_t* x = g_activations;
  if constexpr (kSequence == 0) TIMED_LOOP(CHAIN_PROBE);
  if constexpr (kSequence == 1) TIMED_LOOP(CHAIN_LOAD);
  if constexpr (kSequence == 2) TIMED_LOOP(CHAIN_SIGN);
  if constexpr (kSequence == 3) TIMED_LOOP(CHAIN_KERNEL);
  if constexpr (kSequence == 4) TIMED_LOOP(CHAIN_INT16);
  if constexpr (kSequence == 5) TIMED_LOOP(CHAIN_NIBBLE);
}

template <int kSequence>
double best_gops(int runs) {
  constexpr int64_t kIterations = 2'000'000;  // ~5 ms per run
  double best = 0.0;
  for (int r = 0; r < runs; ++r) {
    const double start = thread_cpu_seconds();
    run_sequence<kSequence>(kIterations);
    const double seconds = thread_cpu_seconds() - start;
    const double gops = double(kIterations) * 8 * 32 * 2 / seconds * 1e-9;
    if (gops > best) best = gops;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (!__builtin_cpu_supports("avx2")) {
    std::printf("int8_sequence_bench: this CPU has no AVX2\n");
    return 0;
  }
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  for (int i = 0; i < 4096; ++i) g_activations[i] = int8_t(i % 101 - 50);
  constexpr int kSequences = 6;
  double gops[kSequences] = {};
  // Interleaved rounds, best of all: the sequences see the same machine conditions.
  for (int round = 0; round < 4; ++round) {
    [&]<int... K>(std::integer_sequence<int, K...>) {
      ((gops[K] = std::max(gops[K], best_gops<K>(runs / 4 + 1))), ...);
    }(std::make_integer_sequence<int, kSequences>{});
  }
  const char* names[kSequences] = {
      "probe: vpmaddubsw + vpmaddwd + vpaddd (registers)",
      "probe + a broadcast activation load",
      "probe + vpsignb (registers)",
      "kernel: broadcast load + vpsignb + probe",
      "int16 pairs: 2 x (vpmaddwd + vpaddd) (registers)",
      "Q4_0: broadcast load + vpmaddubsw + vpaddw",
  };
  std::printf("%-54s %9s %9s\n", "sequence (one thread, 8 chains)", "GOP/s", "vs probe");
  for (int k = 0; k < kSequences; ++k) std::printf("%-54s %9.1f %8.0f%%\n", names[k], gops[k], 100 * gops[k] / gops[0]);
  return 0;
}
