// Regular expressions (the ECMAScript syntax JSON Schema's `pattern` uses) translated into grammar
// expressions, and so into automata: matching is a walk over states, never backtracking, so no pattern can take
// exponential time. What a recognizer cannot do without backtracking (backreferences, lookaround) and what
// would need context (\b, anchors inside the pattern) is refused with the column; see docs/structured_output.md.
//
// The whole output must match: a leading ^ and trailing $ are accepted and change nothing.
#pragma once

#include <cstddef>
#include <string_view>

#include "grammar/grammar_ir.h"

namespace tessera::grammar {

struct RegexOptions {
  // Characters are written as JSON spells them inside a string (the pattern of a JSON Schema string: the
  // value matches it, the output holds it escaped).
  bool json_string = false;
  size_t max_length = 16384;     // bytes of pattern
  int32_t max_repeat = 1000;     // largest count in {n,m}
  int max_nesting = 100;         // parentheses
};

// Throws GrammarError ("regex column 7: ...").
ExprId parse_regex(std::string_view pattern, GrammarIR& ir, const RegexOptions& options = {});

// Character classes shared with the GBNF parser.
CodePointSet regex_class_digit();   // \d
CodePointSet regex_class_word();    // \w
CodePointSet regex_class_space();   // \s (ECMAScript's white space and line terminators)
CodePointSet regex_class_dot();     // . (anything but a line terminator)

}  // namespace tessera::grammar
