// llama.cpp's GBNF notation, so that grammars users already have work:
//
//   root   ::= object
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"   # comments run to the end of the line
//   pair   ::= [a-z]+ ":" ws [0-9]+
//   ws     ::= [ \t\n]*
//
// Literals "..." and classes [...] / [^...] with \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH escapes, '.'
// for any character, grouping, | alternatives, * + ? {m} {m,} {m,n} repetition. A rule may continue over
// several lines; the next `name ::=` starts another. The root rule is `root`. llama.cpp's token references
// (<[id]>, <name>) are refused: they name tokens of one particular vocabulary.
#pragma once

#include <cstddef>
#include <string_view>

#include "grammar/grammar_ir.h"

namespace tessera::grammar {

struct GbnfOptions {
  size_t max_length = 65536;  // bytes of grammar text
  int32_t max_repeat = 1000;
  int max_nesting = 100;
};

// Adds the grammar's rules to `ir` and sets its root. Throws GrammarError ("grammar line 3, column 9: ...").
void parse_gbnf(std::string_view text, GrammarIR& ir, const GbnfOptions& options = {});

}  // namespace tessera::grammar
