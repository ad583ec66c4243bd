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

// str.replace(old, new, count); an empty `old` inserts `replacement` around every code point.
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

// Slice bounds as PySlice_AdjustIndices computes them for a sequence of `length`; `step` must not be 0.
// Returns the indices the slice visits, in order.
std::vector<int64_t> slice_indices(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                   int64_t step);

}  // namespace tessera::chat::pystr
