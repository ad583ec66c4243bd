// Code point ranges as UTF-8 byte-range sequences: [U+0080, U+07FF] is the two-byte sequences
// [C2-DF][80-BF]. The automata work on bytes, so every character class becomes a few of these; a token that
// ends inside a character leaves the automaton between two bytes of it, which is what lets byte-level tokens
// (half a Chinese character) be checked exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/code_point_set.h"

namespace tessera::grammar {

struct ByteRange {
  uint8_t lo = 0, hi = 0;  // inclusive
};

using ByteSequence = std::vector<ByteRange>;  // 1 to 4 ranges, one per byte of the encoding

// The byte sequences whose union is exactly the UTF-8 encodings of `set`'s members.
std::vector<ByteSequence> utf8_sequences(const CodePointSet& set);

// Appends the UTF-8 encoding of `c` (a scalar value) to `out`.
void append_utf8(std::string& out, uint32_t c);

inline constexpr uint32_t kInvalidUtf8 = 0xFFFFFFFF;
// The code point at s[pos], advancing pos past it; kInvalidUtf8 (pos unchanged) for a malformed sequence.
// Grammar and pattern sources arrive in JSON strings, which are valid UTF-8, but parsers must not trust that.
uint32_t next_code_point(std::string_view s, size_t& pos);

}  // namespace tessera::grammar
