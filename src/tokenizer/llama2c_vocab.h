// Import of llama2.c's tokenizer.bin (the vocabulary of the stories models) into the GGUF Vocab convention.
#pragma once

#include <string>

#include "tokenizer/vocab.h"

namespace tessera {

// Layout: int32 max_token_length, then per token until the end of the file: float32 score, int32 length,
// `length` bytes (little-endian). llama2.c keeps real spaces and spells <s>/</s> as "\n<s>\n"; the Vocab
// returned uses "▁", "<s>"/"</s>" and GGUF token types (0 unknown, 1 and 2 control, <0xXX> byte), with
// bos = 1, eos = 2, unk = 0 and model "llama", so it can be written into a GGUF file as is.
// Throws tessera::Error naming the path and offset for an unreadable or truncated file.
Vocab vocab_from_llama2c(const std::string& path);

}  // namespace tessera
