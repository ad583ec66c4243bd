// A recursive-descent parser for ECMAScript regular expressions (the subset a recognizer supports).
#include "grammar/regex.h"

#include <string>
#include <vector>

#include "grammar/grammar_error.h"
#include "grammar/quantifier.h"
#include "grammar/utf8_sequences.h"

namespace tessera::grammar {

CodePointSet regex_class_digit() { return CodePointSet::range('0', '9'); }

CodePointSet regex_class_word() {
  CodePointSet s = CodePointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_');
  return s;
}

CodePointSet regex_class_space() {
  CodePointSet s = CodePointSet::range('\t', '\r');  // \t \n \v \f \r
  for (uint32_t c : {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu}) s.add(c);
  s.add(0x2000, 0x200A);
  return s;
}

CodePointSet regex_class_dot() {
  CodePointSet line_terminators = CodePointSet::of('\n');
  line_terminators.add('\r');
  line_terminators.add(0x2028, 0x2029);
  return line_terminators.complement();
}

namespace {

class RegexParser {
 public:
  RegexParser(std::string_view pattern, GrammarIR& ir, const RegexOptions& options)
      : ir_(ir), options_(options) {
    if (pattern.size() > options.max_length)
      grammar_fail("the regex is {} bytes long; at most {} are accepted", pattern.size(), options.max_length);
    for (size_t pos = 0; pos < pattern.size();) {
      const uint32_t c = next_code_point(pattern, pos);
      if (c == kInvalidUtf8) grammar_fail("the regex is not valid UTF-8");
      cps_.push_back(c);
    }
  }

  ExprId parse() {
    ExprId e = alternation(0, true);
    if (pos_ < cps_.size()) fail_here("unmatched ')'");
    return e;
  }

 private:
  [[noreturn]] void fail_here(const std::string& what) const {
    grammar_fail("regex column {}: {}", pos_ + 1, what);
  }
  bool at_end() const { return pos_ >= cps_.size(); }
  uint32_t peek() const { return cps_[pos_]; }
  bool eat(uint32_t c) {
    if (!at_end() && peek() == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  ExprId char_expr(const CodePointSet& set) { return options_.json_string ? ir_.json_chars(set) : ir_.chars(set); }
  ExprId literal_char(uint32_t c) {
    if (options_.json_string && (c < 0x20 || c == '"' || c == '\\')) return ir_.json_chars(CodePointSet::of(c));
    std::string bytes;
    append_utf8(bytes, c);
    return ir_.literal(bytes);
  }

  ExprId alternation(int depth, bool top) {
    if (depth > options_.max_nesting) fail_here("groups nest too deeply");
    std::vector<ExprId> alts{sequence(depth, top)};
    while (eat('|')) alts.push_back(sequence(depth, top));
    return ir_.alt(std::move(alts));
  }

  ExprId sequence(int depth, bool top) {
    std::vector<ExprId> items;
    const size_t begin = pos_;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '^') {
        // Only where it changes nothing: the start of a top-level alternative (the whole output is matched).
        if (!top || pos_ != begin) fail_here("'^' is only supported at the start of the pattern");
        ++pos_;
        continue;
      }
      if (peek() == '$') {
        ++pos_;
        if (!top || !(at_end() || peek() == '|')) fail_here("'$' is only supported at the end of the pattern");
        continue;
      }
      ExprId atom_expr = atom(depth);
      items.push_back(quantified(atom_expr));
    }
    return ir_.seq(std::move(items));
  }

  ExprId quantified(ExprId e) {
    while (const auto q = parse_quantifier(cps_, pos_, options_.max_repeat, false,
                                           [&](const std::string& what) { fail_here(what); })) {
      eat('?');  // lazy quantifiers match the same strings
      if (!at_end() && (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{'))
        fail_here("nothing to repeat");
      e = ir_.repeat(e, q->min, q->max);
    }
    return e;
  }

  ExprId atom(int depth) {
    const uint32_t c = peek();
    ++pos_;
    switch (c) {
      case '(': {
        if (eat('?')) {
          if (eat(':')) {
          } else if (eat('<')) {
            if (!at_end() && (peek() == '=' || peek() == '!')) fail_here("lookbehind is not supported");
            while (!at_end() && peek() != '>') ++pos_;  // a named group: the name does not matter here
            if (!eat('>')) fail_here("unterminated group name");
          } else if (!at_end() && (peek() == '=' || peek() == '!')) {
            fail_here("lookahead is not supported");
          } else {
            fail_here("this group syntax is not supported");
          }
        }
        ExprId e = alternation(depth + 1, false);
        if (!eat(')')) fail_here("missing ')'");
        return e;
      }
      case ')': fail_here("unmatched ')'");
      case '[': return char_expr(char_class());
      case '.': return char_expr(regex_class_dot());
      case '*':
      case '+':
      case '?': fail_here("nothing to repeat");
      case '{': fail_here("'{' must be escaped outside a repetition count");
      case '}': fail_here("'}' must be escaped");
      case ']': fail_here("']' must be escaped");
      case '\\': {
        CodePointSet set;
        if (escape(false, set)) return char_expr(set);
        return literal_char(set.ranges()[0].lo);
      }
      default: return literal_char(c);
    }
  }

  // After a backslash. Returns true for a class (\d ...), false for one character (then `out` holds it).
  bool escape(bool in_class, CodePointSet& out) {
    if (at_end()) fail_here("the pattern ends with a backslash");
    const uint32_t c = peek();
    ++pos_;
    switch (c) {
      case 'd': out = regex_class_digit(); return true;
      case 'D': out = regex_class_digit().complement(); return true;
      case 'w': out = regex_class_word(); return true;
      case 'W': out = regex_class_word().complement(); return true;
      case 's': out = regex_class_space(); return true;
      case 'S': out = regex_class_space().complement(); return true;
      case 'n': out = CodePointSet::of('\n'); return false;
      case 'r': out = CodePointSet::of('\r'); return false;
      case 't': out = CodePointSet::of('\t'); return false;
      case 'f': out = CodePointSet::of('\f'); return false;
      case 'v': out = CodePointSet::of('\v'); return false;
      case '0':
        if (!at_end() && peek() >= '0' && peek() <= '9') fail_here("octal escapes are not supported");
        out = CodePointSet::of(0);
        return false;
      case 'b':
        if (!in_class) fail_here("word boundaries (\\b) are not supported");
        out = CodePointSet::of('\b');
        return false;
      case 'B': fail_here("word boundaries (\\B) are not supported");
      case 'x': out = CodePointSet::of(hex(2)); return false;
      case 'u': {
        uint32_t v = 0;
        if (eat('{')) {
          v = 0;
          int digits = 0;
          while (!at_end() && peek() != '}') {
            v = v * 16 + hex_digit();
            if (++digits > 6 || v > kMaxCodePoint) fail_here("\\u{...} beyond U+10FFFF");
          }
          if (!eat('}') || digits == 0) fail_here("malformed \\u{...} escape");
        } else {
          v = hex(4);
        }
        if (v >= 0xD800 && v <= 0xDFFF) fail_here("surrogate code points cannot be matched");
        out = CodePointSet::of(v);
        return false;
      }
      case 'c': {
        if (at_end() || !((peek() >= 'a' && peek() <= 'z') || (peek() >= 'A' && peek() <= 'Z')))
          fail_here("\\c must be followed by a letter");
        out = CodePointSet::of(peek() % 32);
        ++pos_;
        return false;
      }
      case 'p':
      case 'P': fail_here("Unicode property escapes (\\p{...}) are not supported");
      case 'k': fail_here("backreferences are not supported");
      default:
        if (c >= '1' && c <= '9') fail_here("backreferences are not supported");
        // Syntax characters and '/' and '-' stand for themselves (as in ECMAScript's unicode mode).
        if (std::string_view("^$\\.*+?()[]{}|/-").find(char(c)) != std::string_view::npos && c < 0x80) {
          out = CodePointSet::of(c);
          return false;
        }
        fail_here(std::string("unknown escape \\") + (c < 0x80 ? std::string(1, char(c)) : std::string("?")));
    }
  }

  uint32_t hex_digit() {
    if (at_end()) fail_here("expected a hex digit");
    const uint32_t c = peek();
    ++pos_;
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    --pos_;
    fail_here("expected a hex digit");
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) v = v * 16 + hex_digit();
    return v;
  }

  // After '['.
  CodePointSet char_class() {
    const bool negated = eat('^');
    CodePointSet set;
    for (;;) {
      if (at_end()) fail_here("missing ']'");
      if (eat(']')) break;  // "[]" matches nothing in ECMAScript, "[^]" anything
      CodePointSet lo_set;
      const bool lo_is_class = class_atom(lo_set);
      if (!lo_is_class && !at_end() && peek() == '-' && pos_ + 1 < cps_.size() && cps_[pos_ + 1] != ']') {
        ++pos_;
        CodePointSet hi_set;
        if (class_atom(hi_set)) fail_here("a class escape cannot end a range");
        const uint32_t lo = lo_set.ranges()[0].lo, hi = hi_set.ranges()[0].lo;
        if (hi < lo) fail_here("range out of order in character class");
        set.add(lo, hi);
      } else {
        set.add(lo_set);
      }
    }
    return negated ? set.complement() : set;
  }

  // One member of a class: a character (false, in `out`) or a class escape (true).
  bool class_atom(CodePointSet& out) {
    const uint32_t c = peek();
    ++pos_;
    if (c == '\\') return escape(true, out);
    if (c == '[' && !at_end() && (peek() == ':' || peek() == '=' || peek() == '.'))
      fail_here("POSIX classes ([:alpha:]) are not supported");
    out = CodePointSet::of(c);
    return false;
  }

  GrammarIR& ir_;
  const RegexOptions& options_;
  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
};

}  // namespace

ExprId parse_regex(std::string_view pattern, GrammarIR& ir, const RegexOptions& options) {
  return RegexParser(pattern, ir, options).parse();
}

}  // namespace tessera::grammar
