// Compile-time unrolling, and a register pin, for SIMD kernels that keep accumulators in registers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

namespace tessera::kernels {

#ifndef TESSERA_AVX512_EMULATED
#define TESSERA_INLINE __attribute__((always_inline))
#else
// The emulated AVX-512 test build (tests/avx512_emulation) leaves inlining to the compiler: forced through SIMDe's
// 512-bit functions, it took GCC a quarter of an hour for one file. Tests need the results there, not the speed.
#define TESSERA_INLINE
#endif

// static_for<N>(f) calls f(std::integral_constant<int, i>) for i = 0..N-1, unrolled before any optimization
// pass runs: at -O2 GCC scalarizes an accumulator array into registers only when every index is a constant
// from the start (with `#pragma GCC unroll` loops it keeps a copy in memory and stores it on every iteration).
template <int N, typename F>
TESSERA_INLINE inline void static_for(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) TESSERA_INLINE {
    (f(std::integral_constant<int, I>{}), ...);
  }(std::make_integer_sequence<int, N>{});
}

// with_constant<N>(i, f) calls f(std::integral_constant<int, i>) for an i known only at run time, 0 <= i < N: a
// template parameter (a prefetch share) chosen by a loop's counter.
template <int N, typename F>
TESSERA_INLINE inline void with_constant(int i, F&& f) {
  static_for<N>([&](auto c) TESSERA_INLINE {
    if (i == decltype(c)::value) f(c);
  });
}

// for_steps<N, kUnroll>(f) calls f(i) for i = 0..N-1 with i an int: unrolled (each call's i a constant once
// inlined) when kUnroll, else as a loop over one copy of f's body. A tile whose unrolled block loop is thousands of
// instructions long runs faster as a loop (matmul_kquant_avx512.cpp), one whose loop is short does not.
template <int N, bool kUnroll, typename F>
TESSERA_INLINE inline void for_steps(F&& f) {
  if constexpr (kUnroll) {
    static_for<N>([&](auto i) TESSERA_INLINE { f(static_cast<int>(decltype(i)::value)); });
  } else {
#pragma GCC unroll 1
    for (int i = 0; i < N; ++i) f(i);
  }
}

// for_each_tile<N>(begin, end, f): a range in tiles of N and one narrower tile for the rest, each tile's width a
// compile-time constant: f(std::integral_constant<int, N>, i) for i = begin, begin + N, ... while N fit, then
// f(std::integral_constant<int, R>, i) for the R < N left, if any.
template <int N, typename F>
TESSERA_INLINE inline void for_each_tile(int64_t begin, int64_t end, F&& f) {
  int64_t i = begin;
  for (; i + N <= end; i += N) f(std::integral_constant<int, N>{}, i);
  static_for<N - 1>([&](auto r) TESSERA_INLINE {
    constexpr int kRest = N - 1 - decltype(r)::value;  // N - 1, ..., 1
    if (end - i == kRest) f(std::integral_constant<int, kRest>{}, i);
  });
}

// A range of n in the fewest tiles of at most N, their widths differing by at most one (the wider first): `count`
// tiles, tile i at begin(i) from the range's start. 16 tokens in tiles of at most 7 are 6, 5 and 5 rather than 7,
// 7 and 2: the same number of weight passes, and no tile whose few independent accumulator chains leave the
// multiply units waiting on their latency.
template <int N>
struct BalancedTiles {
  static_assert(N >= 1);
  int64_t count = 0, base = 0, wider = 0;  // tiles; the narrower width; how many tiles are one wider
  explicit BalancedTiles(int64_t n) {
    if (n <= 0) return;
    count = (n + N - 1) / N;
    base = n / count;
    wider = n % count;
  }
  int64_t begin(int64_t i) const { return i * base + std::min(i, wider); }
  int64_t width(int64_t i) const { return base + (i < wider ? 1 : 0); }
};

// for_each_balanced_tile(tiles, begin, f): each of the tiles of a range starting at `begin`, its width a
// compile-time constant: f(std::integral_constant<int, width>, start, index) for index = 0 .. tiles.count - 1.
template <int N, typename F>
TESSERA_INLINE inline void for_each_balanced_tile(const BalancedTiles<N>& tiles, int64_t begin, F&& f) {
  for (int64_t i = 0; i < tiles.count; ++i) {
    const int64_t width = tiles.width(i), start = begin + tiles.begin(i);
    static_for<N>([&](auto w) TESSERA_INLINE {  // widths 1 .. N: every width a tile can have
      constexpr int kWidth = decltype(w)::value + 1;
      if (width == kWidth) f(std::integral_constant<int, kWidth>{}, start, i);
    });
  }
}

// Pins a vector (__m256, __m256i, ...) in a register at this point: an empty asm that "may change" it. Two uses:
// integer adds are associative, so GCC may turn a chain of accumulations into a tree that keeps every product
// alive at once and spills most of them (a store and a reload per product); and GCC may fold a loaded vector
// into each FMA that uses it as a memory operand, loading it once per use instead of once.
template <typename Vector>
TESSERA_INLINE inline void keep_in_register(Vector& v) {
  asm("" : "+x"(v));
}

}  // namespace tessera::kernels
