// Python str semantics on UTF-8 text: what a Jinja template sees is a Python str, indexed, measured and
// stripped by code point, and printed with repr()'s quoting rules. Every string the interpreter holds is valid
// UTF-8 (templates are checked when parsed, JSON values are valid by construction), so these functions decode
// without error handling.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::chat::pystr {

std::u32string decode(std::string_view text);
std::string encode(std::u32string_view text);

size_t length(std::string_view text);  // len(): code points

enum class Side { Both, Left, Right };
// str.strip/lstrip/rstrip: `chars` absent strips white space (str.isspace), else any of its characters.
std::string strip(std::string_view text, Side side, const std::optional<std::string>& chars = std::nullopt);

// str.split / str.rsplit: `sep` absent splits on runs of white space and drops empty parts; `maxsplit` < 0
// means no limit. Throws Error for an empty separator (Python's ValueError).
std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit,
                               bool from_right = false);
// str.splitlines() without keepends: every line boundary Python recognises (\n, \r\n, \r, \v, \f, \x1c-\x1e,
// \x85, U+2028, U+2029).
std::vector<std::string> splitlines(std::string_view text);

// The first position at or after `start` where `sub` occurs in `text`, or npos; rfind: the last position where
// `sub` occurs within text[0, end). Byte-wise, which is exact on valid UTF-8. Linear in the text whatever the
// pattern (a plain search spends text × pattern steps looking for "aa…ab" in "aaa…"), and charged to the render's
// work budget by the bytes scanned.
size_t find(std::string_view text, std::string_view sub, size_t start = 0);
size_t rfind(std::string_view text, std::string_view sub, size_t end);

// str.replace(old, new, count); an empty `old` inserts `replacement` around every code point. Throws Error when
// the result would pass kMaxStringBytes.
std::string replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count);

// Case mapping of ASCII letters; throws Error naming `what` when the text holds a non-ASCII character that
// Python would map (see unicode_tables.h), rather than return something Python would not.
std::string upper(std::string_view text, const char* what);
std::string lower(std::string_view text, const char* what);
std::string capitalize(std::string_view text, const char* what);  // str.capitalize
std::string title(std::string_view text, const char* what);       // str.title

// repr() of a str: single quotes unless the text holds ' and no ", escapes for \\, the quote, \t \n \r and
// every non-printable character (\xNN, \uNNNN, \UNNNNNNNN).
std::string repr(std::string_view text);

// Python's float.__repr__: the shortest digits that round-trip, fixed notation for exponents -4..15,
// scientific ("1e+16", "1e-05") otherwise; "inf", "-inf", "nan".
std::string float_repr(double value);

// The indices a slice visits, in order: start + i * step for i in [0, count).
struct SliceRange {
  int64_t start = 0, step = 1, count = 0;
  int64_t operator[](int64_t i) const { return start + i * step; }
};

// Slice bounds as PySlice_AdjustIndices computes them for a sequence of `length`; `step` must not be 0. Any
// int64 bounds and step are fine (a step of 2**63-1 visits one index).
SliceRange slice_indices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step);

}  // namespace tessera::chat::pystr
