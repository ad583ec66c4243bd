// The template lexer: text, {{ }} / {% %} tags with the expression tokens inside them, and comments dropped,
// with Hugging Face's whitespace settings (trim_blocks, lstrip_blocks) and the -/+ markers applied the way
// Jinja's lexer applies them, so the text between tags is already exactly what will be printed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::chat {

enum class Tok : uint8_t {
  Text,        // template data, whitespace control applied
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,      // text: the decoded value
  Integer,     // int_value
  Float,       // float_value
  Operator,    // text: "+", "//", "==", "(", ...
  Eof,
};

struct Token {
  Tok type = Tok::Eof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0.0;
  size_t offset = 0;  // into the normalized source (Lexed::source)
};

// Line and column (1-based; columns count code points) of offsets in a source text.
class SourceMap {
 public:
  explicit SourceMap(std::string_view source);
  int line(size_t offset) const;
  int column(size_t offset) const;

 private:
  std::string source_;
  std::vector<size_t> line_starts_;
};

struct Lexed {
  std::string source;  // newlines normalized to \n, one trailing newline removed (Jinja's defaults)
  std::vector<Token> tokens;  // ends with Eof
};

// Throws SyntaxError (with line and column) for text Jinja's lexer rejects: an unterminated comment or
// string, an unexpected character, unbalanced brackets, invalid UTF-8.
Lexed lex(std::string_view source);

}  // namespace tessera::chat
