// Jinja's lexing rules, re-stated: where a tag starts, how whitespace around it is trimmed, and how the
// expression inside is split into tokens.
#include "chat/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>

#include "chat/errors.h"
#include "chat/unicode_tables.h"
#include "core/unicode_class.h"
#include "core/utf8.h"

namespace tessera::chat {
namespace {

// Jinja's operators, longest first so that "//" wins over "/".
constexpr std::string_view kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                           "]",  "(",  ")",  "{",  "}",  ">",  "<",  "=", ".", ":", "|", ",", ";"};

// Python's \s and str.isspace() (Unicode white space), one code point at a time.
size_t space_length(std::string_view s, size_t pos) {
  size_t next = pos;
  const uint32_t cp = utf8::decode(s, next);
  return py_space(cp) ? next - pos : 0;
}

size_t skip_space(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    const size_t n = space_length(s, pos);
    if (n == 0) break;
    pos += n;
  }
  return pos;
}

// str.rstrip(): the length of `text` without its trailing white space.
size_t rstrip_length(std::string_view text) {
  size_t end = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = space_length(text, pos);
    pos += n ? n : utf8::char_length(text, pos);
    if (n == 0) end = pos;
  }
  return end;
}

bool all_space(std::string_view text) {
  return !text.empty() && skip_space(text, 0) == text.size();
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Names are Python identifiers, non-ASCII letters included (Jinja accepts `{{ é }}`); the letter and number
// classes stand in for XID_Start / XID_Continue.
size_t name_char_length(std::string_view s, size_t pos, bool start) {
  const char c = s[pos];
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return 1;
  if (is_digit(c)) return start ? 0 : 1;
  if (static_cast<unsigned char>(c) < 0x80) return 0;
  size_t next = pos;
  const unicode::CharClass cls = unicode::char_class(utf8::decode(s, next));
  return cls == unicode::kLetter || (!start && cls == unicode::kNumber) ? next - pos : 0;
}

size_t name_end(std::string_view s, size_t pos) {
  while (pos < s.size()) {
    const size_t n = name_char_length(s, pos, false);
    if (n == 0) break;
    pos += n;
  }
  return pos;
}

// Newlines to "\n" and one trailing newline dropped, as Jinja does before lexing (keep_trailing_newline=False).
std::string normalize(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)), map_(src_) {}

  Lexed run() {
    size_t pos = 0;
    bool line_starting = true;  // the previous match ended with a newline (or this is the start)
    while (pos < src_.size()) {
      const size_t tag = find_tag(pos);
      if (tag == std::string::npos) {
        push_text(pos, src_.substr(pos));
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      size_t after = tag + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      std::string_view text = std::string_view(src_).substr(pos, tag - pos);
      if (sign == '-') {
        text = text.substr(0, rstrip_length(text));
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: a block or comment tag alone on its line after white space takes that space away.
        const size_t line_begin = text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1;
        if ((line_begin > 0 || line_starting) && all_space(text.substr(line_begin))) text = text.substr(0, line_begin);
      }
      push_text(pos, text);
      if (kind == '#') {
        pos = end_comment(tag, after, line_starting);
      } else {
        pos = lex_tag(tag, after, kind == '{', line_starting);
      }
    }
    push(Tok::Eof, src_.size());
    return Lexed{std::move(src_), std::move(tokens_)};
  }

 private:
  [[noreturn]] void error(size_t offset, const std::string& message) const {
    throw SyntaxError(map_.line(offset), map_.column(offset), message);
  }

  Token& push(Tok type, size_t offset, std::string text = {}) {
    Token t;
    t.type = type;
    t.offset = offset;
    t.text = std::move(text);
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  void push_text(size_t offset, std::string_view text) {
    if (!text.empty()) push(Tok::Text, offset, std::string(text));
  }

  size_t find_tag(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return std::string::npos;
  }

  // The comment ends at the first "#}", which may carry a - or + marker of its own.
  size_t end_comment(size_t tag, size_t body, bool& line_starting) {
    const size_t close = src_.find("#}", body);
    if (close == std::string::npos) error(tag, "missing end of comment tag");
    const char sign = close > body && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    return after_end(close + 2, sign, /*trim_newline=*/true, line_starting);
  }

  // What follows an end marker: "-" eats all white space, a plain block/comment end eats one newline
  // (trim_blocks), "+" keeps everything.
  size_t after_end(size_t pos, char sign, bool trim_newline, bool& line_starting) {
    const size_t start = pos;
    if (sign == '-') {
      pos = skip_space(src_, pos);
    } else if (sign == 0 && trim_newline && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    // Jinja decides lstrip at the next tag from whether this match ended with a newline.
    line_starting = pos > start ? src_[pos - 1] == '\n' : false;
    return pos;
  }

  // Tokens until the end tag. As in Jinja, the end tag is tried first at every position, but only while no
  // bracket is open: "{{ {'a': {'b': 1}} }}" closes its dicts before the tag ends.
  size_t lex_tag(size_t tag, size_t pos, bool variable, bool& line_starting) {
    push(variable ? Tok::VarBegin : Tok::BlockBegin, tag);
    if (!variable && starts_raw(pos)) error(tag, "the 'raw' tag is not supported");
    const std::string_view close = variable ? "}}" : "%}";
    std::vector<char> brackets;  // closers expected, innermost last
    while (true) {
      if (brackets.empty()) {
        const std::string_view rest = std::string_view(src_).substr(pos);
        for (char sign : {'-', '+', char(0)}) {
          if (sign == '+' && variable) continue;  // only block ends know "+"
          const bool match = sign ? rest.size() >= 3 && rest[0] == sign && rest.substr(1, 2) == close
                                  : rest.substr(0, 2) == close;
          if (!match) continue;
          push(variable ? Tok::VarEnd : Tok::BlockEnd, pos);
          return after_end(pos + (sign ? 3 : 2), sign, /*trim_newline=*/!variable, line_starting);
        }
      }
      if (pos >= src_.size()) return pos;  // the parser reports the missing end
      if (const size_t n = space_length(src_, pos)) {
        pos += n;
        continue;
      }
      pos = lex_token(pos, brackets);
    }
  }

  bool starts_raw(size_t pos) const {
    pos = skip_space(src_, pos);
    return src_.compare(pos, 3, "raw") == 0 && name_end(src_, pos) == pos + 3;
  }

  size_t lex_token(size_t pos, std::vector<char>& brackets) {
    const char c = src_[pos];
    if (is_digit(c)) return lex_number(pos);
    if (name_char_length(src_, pos, true)) {
      const size_t end = name_end(src_, pos);
      push(Tok::Name, pos, src_.substr(pos, end - pos));
      return end;
    }
    if (c == '\'' || c == '"') return lex_string(pos);
    for (std::string_view op : kOperators) {
      if (src_.compare(pos, op.size(), op) != 0) continue;
      if (op == "(" || op == "[" || op == "{") {
        brackets.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (brackets.empty()) error(pos, "unexpected '" + std::string(op) + "'");
        if (brackets.back() != op[0])
          error(pos, "unexpected '" + std::string(op) + "', expected '" + std::string(1, brackets.back()) + "'");
        brackets.pop_back();
      }
      push(Tok::Operator, pos, std::string(op));
      return pos + op.size();
    }
    size_t next = pos;
    const uint32_t cp = utf8::decode(src_, next);
    char buf[16];
    std::snprintf(buf, sizeof buf, "U+%04X", cp);
    error(pos, "unexpected character '" + src_.substr(pos, next - pos) + "' (" + buf + ")");
  }

  // Digits of `base` (1: only zeros) with single '_' separators between them.
  size_t digits(size_t pos, int base) const {
    auto ok = [base](char c) {
      if (base == 16) return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
      return c >= '0' && c < char('0' + std::min(base, 10));
    };
    size_t end = pos;
    while (end < src_.size()) {
      if (ok(src_[end])) {
        ++end;
      } else if (src_[end] == '_' && end > pos && end + 1 < src_.size() && ok(src_[end + 1])) {
        end += 2;
      } else {
        break;
      }
    }
    return end;
  }

  // Jinja's number rules: a float needs a fraction or an exponent (1.5, 1e3, 1.5E-3) and is tried first;
  // integers are decimal without leading zeros ("0", "00" aside), or 0x / 0o / 0b.
  size_t lex_number(size_t pos) {
    auto without_underscores = [](std::string_view s) {
      std::string out;
      for (char c : s)
        if (c != '_') out.push_back(c);
      return out;
    };
    size_t f = digits(pos, 10);
    bool is_float = false;
    if (f + 1 < src_.size() && src_[f] == '.' && is_digit(src_[f + 1])) {
      f = digits(f + 1, 10);
      is_float = true;
    }
    if (f < src_.size() && (src_[f] | 0x20) == 'e') {
      size_t e = f + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && is_digit(src_[e])) {
        f = digits(e, 10);
        is_float = true;
      }
    }
    if (is_float) {
      Token& t = push(Tok::Float, pos, src_.substr(pos, f - pos));
      t.float_value = std::strtod(without_underscores(t.text).c_str(), nullptr);
      return f;
    }
    int base = 10;
    size_t start = pos, end = 0;
    if (src_[pos] == '0' && pos + 1 < src_.size()) {
      const char p = char(src_[pos + 1] | 0x20);
      base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 10;
    }
    if (base != 10) {
      start = pos + 2;
      if (start < src_.size() && src_[start] == '_') ++start;
      end = digits(start, base);
      if (end == start) {  // "0x" without digits: the integer 0, then a name
        base = 10;
        start = pos;
      }
    }
    if (base == 10) end = digits(pos, src_[pos] == '0' ? 1 : 10);
    Token& t = push(Tok::Integer, pos, src_.substr(pos, end - pos));
    errno = 0;
    const std::string body = without_underscores(std::string_view(src_).substr(start, end - start));
    const unsigned long long v = std::strtoull(body.c_str(), nullptr, base);
    if (errno == ERANGE || v > uint64_t(INT64_MAX)) error(pos, "integer literal " + t.text + " is too large");
    t.int_value = int64_t(v);
    return end;
  }

  size_t lex_string(size_t pos) {
    const char quote = src_[pos];
    size_t i = pos + 1;
    while (i < src_.size() && src_[i] != quote) i += src_[i] == '\\' ? 2 : 1;
    if (i >= src_.size()) error(pos, "unterminated string literal");
    push(Tok::String, pos, decode_string(pos, std::string_view(src_).substr(pos + 1, i - pos - 1)));
    return i + 1;
  }

  // Jinja decodes a literal with Python's .encode("ascii", "backslashreplace").decode("unicode-escape"):
  // non-ASCII characters first become \x/\u/\U escapes, then every escape is decoded, and an unknown one
  // (\d, \() stays as written.
  std::string decode_string(size_t offset, std::string_view body) const {
    std::string ascii;
    for (size_t p = 0; p < body.size();) {
      const uint32_t cp = utf8::decode(body, p);
      if (cp < 0x80) {
        ascii.push_back(char(cp));
        continue;
      }
      char buf[16];
      std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
      ascii += buf;
    }
    std::string out;
    for (size_t p = 0; p < ascii.size(); ++p) {
      if (ascii[p] != '\\' || p + 1 >= ascii.size()) {
        out.push_back(ascii[p]);
        continue;
      }
      const char e = ascii[++p];
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 1; k <= n; ++k) {
            const char h = p + k < ascii.size() ? char(ascii[p + k] | 0x20) : 0;
            if (!is_digit(h) && !(h >= 'a' && h <= 'f'))
              error(offset, std::string("truncated \\") + e + " escape in string literal");
            cp = cp * 16 + uint32_t(is_digit(h) ? h - '0' : h - 'a' + 10);
          }
          if (cp > 0x10FFFF) error(offset, "illegal Unicode character in string literal");
          if (cp >= 0xD800 && cp <= 0xDFFF) error(offset, "a lone surrogate in a string literal is not supported");
          utf8::append(out, cp);
          p += n;
          break;
        }
        case 'N': error(offset, "\\N{...} escapes in string literals are not supported");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = uint32_t(e - '0');
            for (int k = 0; k < 2 && p + 1 < ascii.size() && ascii[p + 1] >= '0' && ascii[p + 1] <= '7'; ++k)
              cp = cp * 8 + uint32_t(ascii[++p] - '0');
            utf8::append(out, cp);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  std::string src_;
  SourceMap map_;
  std::vector<Token> tokens_;
};

}  // namespace

SourceMap::SourceMap(std::string_view source) : source_(source) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < source_.size(); ++i)
    if (source_[i] == '\n') line_starts_.push_back(i + 1);
}

int SourceMap::line(size_t offset) const {
  return int(std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - line_starts_.begin());
}

int SourceMap::column(size_t offset) const {
  const size_t start = line_starts_[size_t(line(offset) - 1)];
  size_t col = 1;
  for (size_t p = start; p < offset && p < source_.size(); p += utf8::char_length(source_, p)) ++col;
  return int(col);
}

Lexed lex(std::string_view source) {
  if (!utf8::is_valid(source)) throw SyntaxError(1, 1, "the template is not valid UTF-8");
  return Lexer(normalize(source)).run();
}

}  // namespace tessera::chat
