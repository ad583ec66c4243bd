// UTF-8 scanning shared by the tokenizers (splitting text into characters), the chat templates' string
// functions and the streaming detokenizer (holding back incomplete sequences, replacing invalid bytes with U+FFFD).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::utf8 {

enum class SeqState {
  Valid,      // `length` bytes form one well-formed code point
  Truncated,  // the text ends after `length` bytes that are a proper prefix of a well-formed sequence
  Invalid,    // `length` (>= 1) bytes are a maximal ill-formed subpart: replace them by one U+FFFD
};

struct Seq {
  SeqState state;
  size_t length;
};

// Classifies the sequence starting at text[pos] (pos < text.size()) per Unicode table 3-7: no overlong forms,
// no surrogates, nothing above U+10FFFF. "Maximal subpart" is the W3C/Unicode replacement practice.
Seq scan(std::string_view text, size_t pos);

// Length of the character at text[pos] for tokenization: the well-formed sequence, or 1 for a byte that does
// not start one (so invalid input becomes single-byte "characters" that fall back to byte tokens).
inline size_t char_length(std::string_view text, size_t pos) {
  const Seq seq = scan(text, pos);
  return seq.state == SeqState::Valid ? seq.length : 1;
}

// The text with every ill-formed subpart (including a truncated tail) replaced by U+FFFD.
std::string sanitize(std::string_view text);

bool is_valid(std::string_view text);

// Appends code point `cp` (at most U+10FFFF, not a surrogate) as UTF-8.
void append(std::string& out, uint32_t cp);

// The code point at text[pos], advancing `pos` past it; an ill-formed sequence yields U+FFFD and advances by
// its maximal subpart (as sanitize() would replace it).
uint32_t decode(std::string_view text, size_t& pos);

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace tessera::utf8
