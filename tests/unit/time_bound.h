// Wall-time bounds of the tests that guard against super-linear work on hostile or long inputs (a grammar that
// would take minutes to compile, a tokenizer gone quadratic). They are set for the optimized build; the sanitizer
// build (-O0 with ASan and UBSan) does the same work several times slower (one such test took 4.6 s against its
// 3 s bound there), and a bound missed there says nothing about complexity. So the bounds stretch in builds
// without optimization or with AddressSanitizer.
#pragma once

#include <chrono>

namespace tessera::testing {

#if defined(__OPTIMIZE__) && !defined(__SANITIZE_ADDRESS__)
inline constexpr int kTimeBoundScale = 1;
#else
inline constexpr int kTimeBoundScale = 5;
#endif

// `seconds` in the optimized build, scaled by kTimeBoundScale otherwise.
inline std::chrono::seconds time_bound(int seconds) { return std::chrono::seconds(seconds * kTimeBoundScale); }

}  // namespace tessera::testing
