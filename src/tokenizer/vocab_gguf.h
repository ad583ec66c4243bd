// A tokenizer vocabulary as GGUF tokenizer.ggml.* metadata (the keys llama.cpp and Tessera read), for files
// being written and for in-memory files (Hugging Face folders).
#pragma once

#include <cstdint>
#include <string>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "tokenizer/vocab.h"

namespace tessera {

// The keys for `vocab`, in the order llama.cpp's converter writes them; vocab.chat_template becomes
// tokenizer.chat_template when not empty.
gguf::Metadata vocab_metadata(const Vocab& vocab);
void write_vocab(gguf::Writer& writer, const Vocab& vocab);

// The tokenizer.* keys of a GGUF file (and tessera.eog_token_ids), to copy into another file.
gguf::Metadata tokenizer_metadata_of(const gguf::File& file);

// Appends unused "[PAD<id>]" tokens up to n_tokens, as llama.cpp's converter does when a model's embedding has
// more rows than its tokenizer has tokens (Qwen: 151936 rows, 151669 tokens): GGUF readers take the vocabulary
// size from the token list and expect it to match the embedding.
void pad_vocab(Vocab& vocab, int64_t n_tokens);

}  // namespace tessera
