// The split regexes as scanners. Each match_* returns the end (exclusive, in characters) of the word that
// starts at character i; the comments name the regex alternative each block stands for.
#include "tokenizer/pretokenizer.h"

#include <cstdint>

#include "core/error.h"
#include "core/unicode_class.h"
#include "core/utf8.h"

namespace tessera {
namespace {

using unicode::CharClass;

constexpr uint32_t kInvalid = 0xFFFD;  // stands for a byte that is not well-formed UTF-8

// The input decoded once: matching then indexes characters instead of re-decoding bytes.
struct Chars {
  std::vector<uint32_t> cp;      // [n]
  std::vector<CharClass> cls;    // [n]
  std::vector<size_t> offset;    // [n + 1] byte offset of each character, then text.size()
  size_t n = 0;

  bool is(size_t i, CharClass c) const { return i < n && cls[i] == c; }
  bool is_crlf(size_t i) const { return i < n && (cp[i] == '\r' || cp[i] == '\n'); }
  // Extends a run of class c that starts at i.
  size_t run(size_t i, CharClass c) const {
    while (i < n && cls[i] == c) ++i;
    return i;
  }
};

Chars decode(std::string_view text) {
  Chars t;
  t.cp.reserve(text.size());
  t.cls.reserve(text.size());
  t.offset.reserve(text.size() + 1);
  for (size_t pos = 0; pos < text.size();) {
    const auto lead = static_cast<uint8_t>(text[pos]);
    uint32_t cp = lead;
    size_t length = 1;
    if (lead >= 0x80) {
      const utf8::Seq seq = utf8::scan(text, pos);
      if (seq.state == utf8::SeqState::Valid) {
        length = seq.length;
        cp = lead & (0x7F >> length);
        for (size_t k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[pos + k]) & 0x3F);
      } else {
        cp = kInvalid;
      }
    }
    t.cp.push_back(cp);
    t.cls.push_back(unicode::char_class(cp));
    t.offset.push_back(pos);
    pos += length;
  }
  t.offset.push_back(text.size());
  t.n = t.cp.size();
  return t;
}

// Simple case folding restricted to the letters of the contractions: only 's' has a non-ASCII partner
// (U+017F LATIN SMALL LETTER LONG S), which (?i) regexes match too.
uint32_t fold(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + ('a' - 'A');
  if (cp == 0x17F) return 's';
  return cp;
}

// 's|'t|'re|'ve|'m|'ll|'d at i: the length in characters, or 0.
size_t match_contraction(const Chars& t, size_t i, bool ignore_case) {
  if (t.cp[i] != '\'' || i + 1 >= t.n) return 0;
  const auto at = [&](size_t k) { return ignore_case ? fold(t.cp[k]) : t.cp[k]; };
  const uint32_t c1 = at(i + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (i + 2 >= t.n) return 0;
  const uint32_t c2 = at(i + 2);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ over the white space run [i, end): a run followed by more text leaves its last character to
// start the next word (" word"), unless the run is a single character.
size_t match_trailing_space(const Chars& t, size_t i, size_t end) {
  if (end == t.n || end - i < 2) return end;
  return end - 1;
}

size_t match_gpt2(const Chars& t, size_t i) {
  if (const size_t n = match_contraction(t, i, /*ignore_case=*/false)) return i + n;
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the optional space only ever precedes the run.
  const size_t start = t.cp[i] == ' ' ? i + 1 : i;
  if (start < t.n && t.cls[start] != unicode::kSpace) return t.run(start, t.cls[start]);
  // Only white space is left.
  return match_trailing_space(t, i, t.run(i, unicode::kSpace));
}

size_t match_llama3(const Chars& t, size_t i, size_t max_digits) {
  if (const size_t n = match_contraction(t, i, /*ignore_case=*/true)) return i + n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (t.is(i, unicode::kLetter)) return t.run(i, unicode::kLetter);
  if (!t.is_crlf(i) && !t.is(i, unicode::kNumber) && t.is(i + 1, unicode::kLetter))
    return t.run(i + 1, unicode::kLetter);
  // \p{N}{1,3} (Llama-3) or \p{N} (Qwen2)
  if (t.is(i, unicode::kNumber)) {
    const size_t end = t.run(i, unicode::kNumber);
    return end - i > max_digits ? i + max_digits : end;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const size_t start = t.cp[i] == ' ' ? i + 1 : i;
  if (t.is(start, unicode::kOther)) {
    size_t end = t.run(start, unicode::kOther);
    while (t.is_crlf(end)) ++end;
    return end;
  }
  // Only white space is left. \s*[\r\n]+ ends after the run's last line break, if it has one.
  const size_t end = t.run(i, unicode::kSpace);
  for (size_t k = end; k > i; --k) {
    if (t.is_crlf(k - 1)) return k;
  }
  return match_trailing_space(t, i, end);
}

}  // namespace

PreTokenizer pre_tokenizer_from_name(std::string_view name) {
  if (name == "gpt-2" || name == "gpt2") return PreTokenizer::Gpt2;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return PreTokenizer::Llama3;
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreTokenizer::Qwen2;
  fail("byte-level BPE pre-tokenizer '{}' is not supported (supported: gpt-2, llama-bpe, qwen2, deepseek-r1-qwen)",
       name);
}

void split_words(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& words) {
  const Chars t = decode(text);
  for (size_t i = 0; i < t.n;) {
    size_t end = 0;
    switch (kind) {
      case PreTokenizer::Gpt2: end = match_gpt2(t, i); break;
      case PreTokenizer::Llama3: end = match_llama3(t, i, 3); break;
      case PreTokenizer::Qwen2: end = match_llama3(t, i, 1); break;
    }
    words.push_back(text.substr(t.offset[i], t.offset[end] - t.offset[i]));
    i = end;
  }
}

}  // namespace tessera
