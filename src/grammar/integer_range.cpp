// Digit-wise range splitting.
#include "grammar/integer_range.h"

#include <algorithm>
#include <string>
#include <vector>

#include "grammar/grammar_error.h"

namespace tessera::grammar {
namespace {

ExprId digit_range(GrammarIR& ir, char lo, char hi) { return ir.chars(CodePointSet::range(uint32_t(lo), uint32_t(hi))); }

// Numerals of the same length n between lo and hi (digit strings, lo <= hi), leading zeros allowed.
ExprId same_length(GrammarIR& ir, const std::string& lo, const std::string& hi) {
  if (lo.empty()) return ir.empty();
  if (lo == hi) return ir.literal(lo);
  if (lo[0] == hi[0]) return ir.seq({ir.literal(lo.substr(0, 1)), same_length(ir, lo.substr(1), hi.substr(1))});
  const std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
  const std::string nines(rest_lo.size(), '9'), zeros(rest_lo.size(), '0');
  const ExprId any_rest = ir.repeat(digit_range(ir, '0', '9'), int32_t(rest_lo.size()), int32_t(rest_lo.size()));
  std::vector<ExprId> alts;
  char first_full = lo[0], last_full = hi[0];  // leading digits whose rest is unconstrained
  if (rest_lo != zeros) {
    alts.push_back(ir.seq({ir.literal(lo.substr(0, 1)), same_length(ir, rest_lo, nines)}));
    ++first_full;
  }
  const bool hi_partial = rest_hi != nines;
  if (hi_partial) --last_full;
  if (first_full <= last_full) alts.push_back(ir.seq({digit_range(ir, first_full, last_full), any_rest}));
  if (hi_partial) alts.push_back(ir.seq({ir.literal(hi.substr(0, 1)), same_length(ir, zeros, rest_hi)}));
  return ir.alt(std::move(alts));
}

// Non-negative integers in [lo, hi], without leading zeros.
ExprId non_negative(GrammarIR& ir, int64_t lo, int64_t hi) {
  std::vector<ExprId> alts;
  int64_t start = 1;
  for (size_t len = 1; len <= 18; ++len, start *= 10) {
    const int64_t len_lo = len == 1 ? 0 : start, len_hi = start * 10 - 1;
    const int64_t a = std::max(lo, len_lo), b = std::min(hi, len_hi);
    if (a > b) continue;
    alts.push_back(same_length(ir, std::to_string(a), std::to_string(b)));
  }
  return ir.alt(std::move(alts));
}

}  // namespace

ExprId integer_range(GrammarIR& ir, std::optional<int64_t> lo_opt, std::optional<int64_t> hi_opt) {
  const int64_t lo = std::max(lo_opt.value_or(-kMaxIntegerMagnitude), -kMaxIntegerMagnitude);
  const int64_t hi = std::min(hi_opt.value_or(kMaxIntegerMagnitude), kMaxIntegerMagnitude);
  if (lo > hi) grammar_fail("the integer range [{}, {}] is empty", lo, hi);
  std::vector<ExprId> alts;
  if (lo < 0) {
    // -x for x in [max(1, -hi), -lo]
    alts.push_back(ir.seq({ir.literal("-"), non_negative(ir, std::max<int64_t>(1, -hi), -lo)}));
  }
  if (hi >= 0) alts.push_back(non_negative(ir, std::max<int64_t>(0, lo), hi));
  return ir.alt(std::move(alts));
}

}  // namespace tessera::grammar
