// Splitting code point ranges into ranges that share an encoding length and, byte by byte, a prefix.
#include "grammar/utf8_sequences.h"

#include <string>

namespace tessera::grammar {
namespace {

int encoded_length(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

void encode(uint32_t c, uint8_t* out) {
  switch (encoded_length(c)) {
    case 1: out[0] = uint8_t(c); break;
    case 2:
      out[0] = uint8_t(0xC0 | (c >> 6));
      out[1] = uint8_t(0x80 | (c & 0x3F));
      break;
    case 3:
      out[0] = uint8_t(0xE0 | (c >> 12));
      out[1] = uint8_t(0x80 | ((c >> 6) & 0x3F));
      out[2] = uint8_t(0x80 | (c & 0x3F));
      break;
    default:
      out[0] = uint8_t(0xF0 | (c >> 18));
      out[1] = uint8_t(0x80 | ((c >> 12) & 0x3F));
      out[2] = uint8_t(0x80 | ((c >> 6) & 0x3F));
      out[3] = uint8_t(0x80 | (c & 0x3F));
  }
}

// [lo, hi] holds no surrogate. Splits until every byte position of the encodings of lo..hi ranges
// independently (the Cartesian product of the byte ranges is exactly the encodings).
void split(uint32_t lo, uint32_t hi, std::vector<ByteSequence>& out) {
  for (uint32_t boundary : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= boundary && hi > boundary) {
      split(lo, boundary, out);
      split(boundary + 1, hi, out);
      return;
    }
  }
  const int n = encoded_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t(1) << (6 * i)) - 1;  // the bits of the last i bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  ByteSequence seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<ByteSequence> utf8_sequences(const CodePointSet& set) {
  std::vector<ByteSequence> out;
  for (const CodePointRange& r : set.ranges()) split(r.lo, r.hi, out);
  return out;
}

uint32_t next_code_point(std::string_view s, size_t& pos) {
  const auto b = uint8_t(s[pos]);
  const int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || pos + size_t(n) > s.size()) return kInvalidUtf8;
  uint32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (int i = 1; i < n; ++i) {
    const auto cont = uint8_t(s[pos + size_t(i)]);
    if ((cont >> 6) != 2) return kInvalidUtf8;
    c = (c << 6) | (cont & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMin[n] || (c >= 0xD800 && c <= 0xDFFF) || c > kMaxCodePoint) return kInvalidUtf8;
  pos += size_t(n);
  return c;
}

void append_utf8(std::string& out, uint32_t c) {
  uint8_t b[4];
  encode(c, b);
  out.append(reinterpret_cast<const char*>(b), size_t(encoded_length(c)));
}

}  // namespace tessera::grammar
