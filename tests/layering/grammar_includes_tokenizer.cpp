// Compiled as if it were in src/grammar/: the grammar engine reaching for the tokenizer. Grammars, masks and the
// vocabulary trie work on token bytes only (engine/constraint.cpp hands them the pieces), so src/grammar sits on
// core alone. tests/CMakeLists.txt expects this file NOT to compile.
#include "tokenizer/tokenizer.h"
