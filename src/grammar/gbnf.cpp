// A recursive-descent parser for GBNF.
#include "grammar/gbnf.h"

#include <string>
#include <unordered_set>
#include <vector>

#include "grammar/grammar_error.h"
#include "grammar/quantifier.h"
#include "grammar/utf8_sequences.h"

namespace tessera::grammar {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, GrammarIR& ir, const GbnfOptions& options)
      : text_(text), ir_(ir), options_(options) {
    if (text.size() > options.max_length)
      grammar_fail("the grammar is {} bytes long; at most {} are accepted", text.size(), options.max_length);
  }

  void parse() {
    skip_space(true);
    while (pos_ < text_.size()) {
      const size_t name_at = pos_;
      const std::string name = rule_name();
      skip_space(false);
      if (!eat_text("::=")) fail_here("expected '::=' after the rule name '" + name + "'");
      const int32_t rule = ir_.rule(name);
      if (!defined_.insert(name).second) {
        pos_ = name_at;
        fail_here("rule '" + name + "' is defined twice");
      }
      ir_.define(rule, alternatives(0));
      skip_space(true);
    }
    const int32_t root = ir_.find_rule("root");
    if (root < 0 || !defined_.count("root")) grammar_fail("the grammar has no 'root' rule");
    for (const Rule& r : ir_.rules())
      if (r.body < 0) grammar_fail("rule '{}' is used but never defined", r.name);
    ir_.root = root;
  }

 private:
  [[noreturn]] void fail_here(const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    grammar_fail("grammar line {}, column {}: {}", line, column, what);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  bool eat(char c) {
    if (!at_end() && peek() == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool eat_text(std::string_view s) {
    if (text_.substr(pos_, s.size()) == s) {
      pos_ += s.size();
      return true;
    }
    return false;
  }

  // Spaces, tabs, comments; newlines too when `newlines` (between rules, inside parentheses, after '|').
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string rule_name() {
    const size_t begin = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == begin) fail_here("expected a rule name");
    return std::string(text_.substr(begin, pos_ - begin));
  }

  // True when the text at pos_ (after blank space and newlines) starts a new rule: `name ::=`.
  bool at_rule_start() {
    size_t p = pos_;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  ExprId alternatives(int depth) {
    if (depth > options_.max_nesting) fail_here("parentheses nest too deeply");
    std::vector<ExprId> alts{sequence(depth)};
    while (true) {
      // An alternative may start on the next line with '|' (llama.cpp only allows that inside parentheses).
      const size_t save = pos_;
      skip_space(true);
      if (!eat('|')) {
        pos_ = save;
        break;
      }
      skip_space(true);
      alts.push_back(sequence(depth));
    }
    return ir_.alt(std::move(alts));
  }

  ExprId sequence(int depth) {
    std::vector<ExprId> items;
    for (;;) {
      const size_t save = pos_;
      skip_space(depth > 0);
      // A newline outside parentheses ends the rule, unless the next line goes on with '|' (handled by the
      // caller) or with more elements (a rule over several lines): anything but a new `name ::=`.
      if (!at_end() && (peek() == '\n' || peek() == '\r')) {
        skip_space(true);
        if (at_end() || at_rule_start() || peek() == '|' || peek() == ')') {
          pos_ = save;
          break;
        }
      }
      if (at_end() || peek() == '|' || peek() == ')') {
        pos_ = save;
        break;
      }
      if (at_rule_start()) {
        pos_ = save;
        break;
      }
      items.push_back(repetition(element(depth)));
    }
    return ir_.seq(std::move(items));
  }

  ExprId repetition(ExprId e) {
    while (const auto q = parse_quantifier(text_, pos_, options_.max_repeat, true,
                                           [&](const std::string& what) { fail_here(what); }))
      e = ir_.repeat(e, q->min, q->max);
    return e;
  }

  ExprId element(int depth) {
    const char c = peek();
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (!eat('"')) {
        if (at_end() || peek() == '\n') fail_here("unterminated string literal");
        append_utf8(bytes, character());
      }
      return ir_.literal(bytes);
    }
    if (c == '[') {
      ++pos_;
      const bool negated = eat('^');
      CodePointSet set;
      while (!eat(']')) {
        if (at_end() || peek() == '\n') fail_here("unterminated character class");
        const uint32_t lo = character();
        if (!at_end() && peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
          ++pos_;
          const uint32_t hi = character();
          if (hi < lo) fail_here("range out of order in character class");
          set.add(lo, hi);
        } else {
          set.add(lo);
        }
      }
      return ir_.chars(negated ? set.complement() : set);
    }
    if (c == '.') {
      ++pos_;
      return ir_.chars(CodePointSet::all());
    }
    if (c == '(') {
      ++pos_;
      skip_space(true);
      const ExprId e = alternatives(depth + 1);
      skip_space(true);
      if (!eat(')')) fail_here("expected ')'");
      return e;
    }
    if (c == '<' || c == '!') fail_here("token references (<...>) are not supported: they depend on one vocabulary");
    if (is_name_char(c)) return ir_.ref(ir_.rule(rule_name()));
    fail_here(std::string("unexpected character '") + c + "'");
  }

  // One character of a literal or class, escapes decoded.
  uint32_t character() {
    if (peek() != '\\') {
      const uint32_t c = next_code_point(text_, pos_);
      if (c == kInvalidUtf8) fail_here("the grammar is not valid UTF-8");
      return c;
    }
    ++pos_;
    if (at_end()) fail_here("the grammar ends with a backslash");
    const char e = peek();
    ++pos_;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': return '\\';
      case '"': return '"';
      case '[': return '[';
      case ']': return ']';
      case '-': return '-';
      case '^': return '^';
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      default: fail_here(std::string("unknown escape '\\") + e + "'");
    }
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (at_end()) fail_here("expected a hex digit");
      const char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9') {
        d = uint32_t(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = uint32_t(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = uint32_t(c - 'A' + 10);
      } else {
        fail_here("expected a hex digit");
      }
      v = v * 16 + d;
      ++pos_;
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) fail_here("escape is not a Unicode scalar value");
    return v;
  }

  std::string_view text_;
  GrammarIR& ir_;
  const GbnfOptions& options_;
  size_t pos_ = 0;
  std::unordered_set<std::string> defined_;
};

}  // namespace

void parse_gbnf(std::string_view text, GrammarIR& ir, const GbnfOptions& options) {
  GbnfParser(text, ir, options).parse();
}

}  // namespace tessera::grammar
