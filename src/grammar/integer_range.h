// Decimal integers within bounds as a grammar expression (JSON Schema minimum/maximum on integers): the
// classic digit-by-digit split of [lo, hi] into ranges of equal length whose digits vary independently, e.g.
// [7, 123] = [7-9] | [1-9][0-9] | 1[0-1][0-9] | 12[0-3]. No leading zeros, no "-0".
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/grammar_ir.h"

namespace tessera::grammar {

// Integers magnitudes stay below 10^18 (int64 range): an open side is cut there.
inline constexpr int64_t kMaxIntegerMagnitude = 999999999999999999;

// [lo, hi] inclusive; absent = open. Throws GrammarError when the range is empty.
ExprId integer_range(GrammarIR& ir, std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace tessera::grammar
