// The repetition suffixes regular expressions and GBNF share: * + ? {m} {m,} {m,n}, with counts bounded (a
// count is a multiplier on automaton size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "grammar/grammar_ir.h"

namespace tessera::grammar {

struct Quantifier {
  int32_t min = 1, max = 1;  // max kUnbounded: no limit
};

// Reads a quantifier at src[pos] (src: any indexable sequence of characters or code points), advancing pos.
// Returns nothing, pos unchanged, when none is there. `blanks`: spaces may separate the parts of {m,n} (GBNF).
// `fail(message)` must throw.
template <typename Source, typename Fail>
std::optional<Quantifier> parse_quantifier(const Source& src, size_t& pos, int32_t max_repeat, bool blanks,
                                           Fail&& fail) {
  auto at = [&](char c) { return pos < src.size() && uint32_t(src[pos]) == uint32_t(uint8_t(c)); };
  auto skip = [&] {
    while (blanks && (at(' ') || at('\t'))) ++pos;
  };
  auto number = [&] {
    skip();
    if (pos >= src.size() || uint32_t(src[pos]) < '0' || uint32_t(src[pos]) > '9')
      fail("expected a number in a repetition count");
    int64_t n = 0;
    while (pos < src.size() && uint32_t(src[pos]) >= '0' && uint32_t(src[pos]) <= '9') {
      n = n * 10 + int64_t(uint32_t(src[pos]) - '0');
      if (n > max_repeat) fail("repetition count above " + std::to_string(max_repeat) + " is not supported");
      ++pos;
    }
    skip();
    return int32_t(n);
  };
  Quantifier q;
  if (at('*')) {
    q = {0, kUnbounded};
  } else if (at('+')) {
    q = {1, kUnbounded};
  } else if (at('?')) {
    q = {0, 1};
  } else if (at('{')) {
    ++pos;
    q.min = q.max = number();
    if (at(',')) {
      ++pos;
      skip();
      q.max = at('}') ? kUnbounded : number();
    }
    if (!at('}')) fail("expected '}' to close a repetition count");
    if (q.max != kUnbounded && q.max < q.min) fail("repetition {m,n} with n < m");
  } else {
    return std::nullopt;
  }
  ++pos;
  return q;
}

}  // namespace tessera::grammar
