// Writes a tokenizer vocabulary as GGUF tokenizer.ggml.* metadata (the keys llama.cpp and Tessera read).
#pragma once

#include "formats/gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

void write_vocab(gguf::Writer& writer, const Vocab& vocab);

}  // namespace tessera
