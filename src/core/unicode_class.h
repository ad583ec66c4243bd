// Unicode character classes the byte-level BPE pre-tokenizers match: \p{L} (letters), \p{N} (numbers) and \s
// (the White_Space property, as the Rust regex crate behind Hugging Face tokenizers defines it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::unicode {

struct CodeRange {
  uint32_t first, last;  // inclusive
};

// Whether `cp` lies in one of `count` sorted, disjoint ranges (binary search).
bool in_ranges(const CodeRange* ranges, size_t count, uint32_t cp);

// Generated tables (unicode_ranges.cpp, from scripts/gen_unicode_ranges.py).
extern const CodeRange kLetterRanges[];
extern const size_t kLetterRangesCount;
extern const CodeRange kNumberRanges[];
extern const size_t kNumberRangesCount;
extern const CodeRange kWhiteSpaceRanges[];
extern const size_t kWhiteSpaceRangesCount;

// Categories are exclusive: no code point is both a letter and white space.
enum CharClass : uint8_t {
  kOther = 0,
  kLetter = 1,
  kNumber = 2,
  kSpace = 3,
};

// A 64 KiB table answers the Basic Multilingual Plane in one load; the rest is a binary search.
CharClass char_class_slow(uint32_t cp);
extern const uint8_t* const kBmpClass;  // [0x10000]

inline CharClass char_class(uint32_t cp) {
  return cp < 0x10000 ? static_cast<CharClass>(kBmpClass[cp]) : char_class_slow(cp);
}

}  // namespace tessera::unicode
