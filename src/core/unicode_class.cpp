// Lookup over the generated category ranges: binary search, and a flat table for the BMP built once.
#include "core/unicode_class.h"

#include <algorithm>
#include <array>

namespace tessera::unicode {
namespace {

const std::array<uint8_t, 0x10000>& bmp_table() {
  static const auto table = [] {
    std::array<uint8_t, 0x10000> t{};
    for (uint32_t cp = 0; cp < 0x10000; ++cp) t[cp] = char_class_slow(cp);
    return t;
  }();
  return table;
}

}  // namespace

bool in_ranges(const CodeRange* ranges, size_t count, uint32_t cp) {
  const CodeRange* end = ranges + count;
  const CodeRange* it = std::upper_bound(ranges, end, cp, [](uint32_t c, const CodeRange& r) { return c < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

CharClass char_class_slow(uint32_t cp) {
  if (in_ranges(kLetterRanges, kLetterRangesCount, cp)) return kLetter;
  if (in_ranges(kNumberRanges, kNumberRangesCount, cp)) return kNumber;
  if (in_ranges(kWhiteSpaceRanges, kWhiteSpaceRangesCount, cp)) return kSpace;
  return kOther;
}

const uint8_t* const kBmpClass = bmp_table().data();

}  // namespace tessera::unicode
