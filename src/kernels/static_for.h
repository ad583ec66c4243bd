// Compile-time unrolling for SIMD kernels that keep an array of accumulators in registers.
#pragma once

#include <utility>

namespace tessera::kernels {

#define TESSERA_INLINE __attribute__((always_inline))

// static_for<N>(f) calls f(std::integral_constant<int, i>) for i = 0..N-1, unrolled before any optimization
// pass runs: at -O2 GCC scalarizes an accumulator array into registers only when every index is a constant
// from the start (with `#pragma GCC unroll` loops it keeps a copy in memory and stores it on every iteration).
template <int N, typename F>
TESSERA_INLINE inline void static_for(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) TESSERA_INLINE {
    (f(std::integral_constant<int, I>{}), ...);
  }(std::make_integer_sequence<int, N>{});
}

}  // namespace tessera::kernels
