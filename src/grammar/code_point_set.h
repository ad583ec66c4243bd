// Sets of Unicode code points as sorted, disjoint, non-adjacent ranges: character classes of regexes and GBNF,
// and the characters a JSON string may hold. Surrogates (U+D800..U+DFFF) are never members: they are not
// characters UTF-8 can encode.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodePointRange {
  uint32_t lo = 0, hi = 0;  // inclusive
  bool operator==(const CodePointRange&) const = default;
};

class CodePointSet {
 public:
  CodePointSet() = default;
  static CodePointSet of(uint32_t c) { return range(c, c); }
  static CodePointSet range(uint32_t lo, uint32_t hi);
  static CodePointSet all();  // every Unicode scalar value

  void add(uint32_t lo, uint32_t hi);
  void add(uint32_t c) { add(c, c); }
  void add(const CodePointSet& other);
  CodePointSet complement() const;  // within the Unicode scalar values
  CodePointSet minus(const CodePointSet& other) const;
  bool contains(uint32_t c) const;
  bool empty() const { return ranges_.empty(); }
  uint64_t size() const;  // number of code points

  const std::vector<CodePointRange>& ranges() const { return ranges_; }
  bool operator==(const CodePointSet&) const = default;

 private:
  void normalize();
  std::vector<CodePointRange> ranges_;
};

}  // namespace tessera::grammar
