// Python str operations over UTF-8.
#include "chat/pystr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/operators.h"
#include "chat/unicode_tables.h"
#include "chat/work_budget.h"
#include "core/error.h"
#include "core/utf8.h"

namespace tessera::chat::pystr {
namespace {

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
         c == 0x2029;
}

void require_ascii_case(std::u32string_view text, const char* what) {
  for (char32_t c : text)
    if (cased_non_ascii(c))
      fail("{}: case mapping of non-ASCII letters is not supported (U+{:04X})", what, static_cast<uint32_t>(c));
}

char32_t ascii_upper(char32_t c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
char32_t ascii_lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
bool ascii_letter(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Before appending one more part to a split's result: 'xy' * 30000000 splits into 30 million strings, which the
// list size limit refuses before they are made (each becomes a Value) and the work budget counts.
template <typename Parts>
void add_part(const Parts& parts) {
  check_size((parts.size() + 1) * sizeof(Value));
  charge_work(1);
}

// Python splits on white space by skipping runs of it; this finds the parts of `text` between runs.
std::vector<std::u32string> split_whitespace(std::u32string_view s, int64_t maxsplit, bool from_right) {
  std::vector<std::u32string> parts;
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && py_space(s[i])) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {  // the rest, trailing white space included
        add_part(parts);
        parts.emplace_back(s.substr(i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !py_space(s[j])) ++j;
      add_part(parts);
      parts.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  size_t i = s.size();
  while (true) {
    while (i > 0 && py_space(s[i - 1])) --i;
    if (i == 0) break;
    if (maxsplit >= 0 && int64_t(parts.size()) == maxsplit) {  // the rest, leading white space included
      add_part(parts);
      parts.emplace_back(s.substr(0, i));
      break;
    }
    size_t j = i;
    while (j > 0 && !py_space(s[j - 1])) --j;
    add_part(parts);
    parts.emplace_back(s.substr(j, i - j));
    i = j;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

// Knuth-Morris-Pratt: where the first match of the pattern (length m, byte i is p(i)) starts in the text (length
// n, byte i is t(i)), or npos. Through accessors so that the same code searches backwards.
template <typename Pattern, typename Text>
size_t kmp_search(size_t m, Pattern p, size_t n, Text t) {
  std::vector<size_t> border(m, 0);  // border[i]: the longest proper prefix of p[0..i] that is also its suffix
  for (size_t i = 1, k = 0; i < m; ++i) {
    while (k > 0 && p(i) != p(k)) k = border[k - 1];
    if (p(i) == p(k)) ++k;
    border[i] = k;
  }
  for (size_t i = 0, k = 0; i < n; ++i) {
    while (k > 0 && t(i) != p(k)) k = border[k - 1];
    if (t(i) == p(k)) ++k;
    if (k == m) return i + 1 - m;
  }
  return std::string_view::npos;
}

// Below this pattern length the library search (memchr, then a compare per candidate) is linear enough.
constexpr size_t kShortPattern = 32;

// What a library search over `scanned` bytes may cost: in a run of one repeated byte every position is a candidate
// (memchr finds each, then a compare of up to the pattern's length), ~7 ns a byte for 'aaab' in 'a' * 60000000:
// charged as code points, more for longer patterns.
void charge_short_search(size_t scanned, size_t pattern) { charge_chars(scanned * (1 + pattern / 16)); }

}  // namespace

size_t find(std::string_view text, std::string_view sub, size_t start) {
  if (start > text.size()) return std::string_view::npos;
  size_t hit = std::string_view::npos;
  if (sub.size() <= kShortPattern) {
    hit = text.find(sub, start);
    charge_short_search((hit == std::string_view::npos ? text.size() : hit + sub.size()) - start, sub.size());
  } else {
    const std::string_view t = text.substr(start);
    hit = kmp_search(sub.size(), [&](size_t i) { return sub[i]; }, t.size(), [&](size_t i) { return t[i]; });
    charge_chars(sub.size() + (hit == std::string_view::npos ? t.size() : hit + sub.size()));
    if (hit != std::string_view::npos) hit += start;
  }
  return hit;
}

size_t rfind(std::string_view text, std::string_view sub, size_t end) {
  end = std::min(end, text.size());
  if (sub.size() > end) return std::string_view::npos;
  size_t hit = std::string_view::npos;
  if (sub.size() <= kShortPattern) {
    hit = text.substr(0, end).rfind(sub);
    charge_short_search(end - (hit == std::string_view::npos ? 0 : hit), sub.size());
  } else {
    const size_t m = sub.size();
    const size_t r = kmp_search(m, [&](size_t i) { return sub[m - 1 - i]; }, end, [&](size_t i) { return text[end - 1 - i]; });
    if (r != std::string_view::npos) hit = end - r - m;
    charge_chars(m + end - (hit == std::string_view::npos ? 0 : hit));
  }
  return hit;
}

std::u32string decode(std::string_view text) {
  charge_chars(text.size());
  std::u32string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) out.push_back(utf8::decode(text, pos));
  return out;
}

std::string encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) utf8::append(out, c);
  return out;
}

size_t length(std::string_view text) {
  charge_bytes(text.size());
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;  // count lead bytes
  return n;
}

std::string strip(std::string_view text, Side side, const std::optional<std::string>& chars) {
  const std::u32string s = decode(text);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  std::sort(set.begin(), set.end());  // a binary search per character: `chars` may be as long as the text
  set.erase(std::unique(set.begin(), set.end()), set.end());
  auto strippable = [&](char32_t c) { return chars ? std::binary_search(set.begin(), set.end(), c) : py_space(c); };
  size_t b = 0, e = s.size();
  if (side != Side::Right)
    while (b < e && strippable(s[b])) ++b;
  if (side != Side::Left)
    while (e > b && strippable(s[e - 1])) --e;
  return encode(std::u32string_view(s).substr(b, e - b));
}

std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit,
                               bool from_right) {
  std::vector<std::string> out;
  if (!sep) {
    for (const std::u32string& part : split_whitespace(decode(text), maxsplit, from_right)) out.push_back(encode(part));
    return out;
  }
  if (sep->empty()) fail("empty separator");
  // Byte-wise search is exact: a valid UTF-8 separator only matches at code point boundaries.
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      const size_t hit = find(text, *sep, start);
      if (hit == std::string_view::npos) break;
      add_part(out);
      out.emplace_back(text.substr(start, hit - start));
      start = hit + sep->size();
    }
    out.emplace_back(text.substr(start));
    return out;
  }
  size_t end = text.size();
  while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t hit = rfind(text, *sep, end);
    if (hit == std::string_view::npos) break;
    add_part(out);
    out.emplace_back(text.substr(hit + sep->size(), end - hit - sep->size()));
    end = hit;
  }
  out.emplace_back(text.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view text) {
  const std::u32string s = decode(text);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!is_line_break(s[i])) continue;
    add_part(out);
    out.push_back(encode(std::u32string_view(s).substr(start, i - start)));
    if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    start = i + 1;
  }
  if (start < s.size()) out.push_back(encode(std::u32string_view(s).substr(start)));
  return out;
}

std::string replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    // Python inserts the replacement before every code point and at the end, `count` times at most.
    size_t pos = 0;
    while (true) {
      if (count >= 0 && done >= count) break;
      out.append(replacement);
      check_size(out.size());
      ++done;
      if (pos >= text.size()) break;
      const size_t next = pos + utf8::char_length(text, pos);
      out.append(text.substr(pos, next - pos));
      pos = next;
    }
    out.append(text.substr(std::min(pos, text.size())));
    return out;
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    const size_t hit = find(text, old, start);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(start, hit - start));
    out.append(replacement);
    check_size(out.size());
    start = hit + old.size();
    ++done;
  }
  out.append(text.substr(start));
  return out;
}

std::string upper(std::string_view text, const char* what) {
  std::u32string s = decode(text);
  require_ascii_case(s, what);
  for (char32_t& c : s) c = ascii_upper(c);
  return encode(s);
}

std::string lower(std::string_view text, const char* what) {
  std::u32string s = decode(text);
  require_ascii_case(s, what);
  for (char32_t& c : s) c = ascii_lower(c);
  return encode(s);
}

std::string capitalize(std::string_view text, const char* what) {
  std::u32string s = decode(text);
  require_ascii_case(s, what);
  for (size_t i = 0; i < s.size(); ++i) s[i] = i == 0 ? ascii_upper(s[i]) : ascii_lower(s[i]);
  return encode(s);
}

std::string title(std::string_view text, const char* what) {
  std::u32string s = decode(text);
  require_ascii_case(s, what);
  // A letter that follows a cased character is lowered, any other is upper-cased (str.title's word rule).
  bool previous_cased = false;
  for (char32_t& c : s) {
    c = previous_cased ? ascii_lower(c) : ascii_upper(c);
    previous_cased = ascii_letter(c);
  }
  return encode(s);
}

std::string repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  charge_chars(text.size());
  std::string out(1, quote);
  out.reserve(text.size() + 2);
  for (size_t pos = 0; pos < text.size();) {
    const char b = text[pos];
    if (b >= 0x20 && b < 0x7F && b != quote && b != '\\') {  // printable ASCII, by far the most common
      out.push_back(b);
      ++pos;
      continue;
    }
    const size_t begin = pos;
    const uint32_t c = utf8::decode(text, pos);
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (!py_printable(c)) {
      char buf[16];
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
      else if (c < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", c);
      out += buf;
    } else {
      out.append(text.substr(begin, pos - begin));
    }
  }
  out.push_back(quote);
  return out;
}

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  // The shortest round-trip digits in scientific form ("d.ddde±x"), laid out again by Python's rule.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits.push_back(c);
  std::string out = negative ? "-" : "";
  const int point = exponent + 1;  // digits before the decimal point
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0." + std::string(size_t(-point), '0') + digits;
    } else if (size_t(point) >= digits.size()) {
      out += digits + std::string(size_t(point) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, size_t(point)) + "." + digits.substr(size_t(point));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

SliceRange slice_indices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  // CPython clamps the step so that -step cannot overflow.
  if (step < -INT64_MAX) step = -INT64_MAX;
  // PySlice_AdjustIndices: negative bounds count from the end, then clamp to the range the step can visit.
  auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += length;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= length) {
      x = step < 0 ? length - 1 : length;
    }
    return x;
  };
  const int64_t b = adjust(start, step < 0 ? length - 1 : 0);
  const int64_t e = adjust(stop, step < 0 ? -1 : length);
  // The count as PySlice_AdjustIndices computes it: b and e lie in [-1, length], so nothing overflows, and
  // neither does start + i * step for i < count (it stays between b and e).
  int64_t count = 0;
  if (step > 0 && b < e) count = (e - b - 1) / step + 1;
  if (step < 0 && e < b) count = (b - e - 1) / -step + 1;
  return SliceRange{b, step, count};
}

}  // namespace tessera::chat::pystr
