// The parser: Jinja's grammar (operator precedence, tuples, filters and tests, for/if/set, loop controls and
// Hugging Face's generation block) from the lexer's tokens to the AST. Filters and tests are resolved here, so
// an unsupported one is reported when the template is loaded, not when a request reaches it.
#pragma once

#include "chat/ast.h"
#include "chat/lexer.h"

namespace tessera::chat {

// Throws SyntaxError with the line and column of the offending token.
Body parse(const Lexed& lexed);

}  // namespace tessera::chat
