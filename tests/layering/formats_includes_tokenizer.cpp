// Compiled as if it were in src/formats/: the file-format layer reaching up into the tokenizer (the cycle that
// vocab_gguf and llama2c once made). tests/CMakeLists.txt expects this file NOT to compile.
#include "tokenizer/vocab.h"
