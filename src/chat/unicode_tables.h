// Python's character predicates (str.isprintable, str.isspace, "is touched by case mapping") as code point
// ranges generated from Python's own unicodedata (scripts/gen_chat_unicode_tables.py).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/unicode_class.h"

namespace tessera::chat {

using unicode::CodeRange;

extern const CodeRange kNotPrintableRanges[];
extern const size_t kNotPrintableRangesCount;
extern const CodeRange kSpaceRanges[];
extern const size_t kSpaceRangesCount;
extern const CodeRange kCasedNonAsciiRanges[];
extern const size_t kCasedNonAsciiRangesCount;

// str.isprintable() of one character: what repr() leaves unescaped.
inline bool py_printable(uint32_t cp) {
  if (cp >= 0x20 && cp < 0x7F) return true;
  return !unicode::in_ranges(kNotPrintableRanges, kNotPrintableRangesCount, cp);
}

// str.isspace() of one character: what strip(), split() and Jinja's whitespace control remove.
inline bool py_space(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= '\t' && cp <= '\r') || (cp >= 0x1C && cp <= 0x1F);
  return unicode::in_ranges(kSpaceRanges, kSpaceRangesCount, cp);
}

// A non-ASCII character that upper/lower/title/capitalize would have to map.
inline bool cased_non_ascii(uint32_t cp) {
  return cp >= 0x80 && unicode::in_ranges(kCasedNonAsciiRanges, kCasedNonAsciiRangesCount, cp);
}

}  // namespace tessera::chat
