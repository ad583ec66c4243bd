// Hugging Face tokenizer.json (byte-level BPE models: GPT-2, Llama-3, Qwen2/2.5/3) as a Vocab in GGUF's terms,
// so that the same BpeTokenizer serves GGUF files and Hugging Face folders.
#pragma once

#include <string>

#include "tokenizer/vocab.h"

namespace tessera {

// Reads model.vocab, model.merges ("a b" strings or [a, b] pairs), added_tokens (special -> Control, others ->
// UserDefined) and recognizes the pre-tokenizer regex (GPT-2, Llama-3 or Qwen2 -> Vocab::pre). BOS/EOS come
// from tokenizer_config.json in the same folder when it is there. The NFC normalizer Qwen declares is not
// applied: text is taken to be NFC already (as llama.cpp does). A BPE with byte_fallback (Llama 2, Mistral:
// SentencePiece converted to tokenizer.json, spaces as "▁" by normalizer or Metaspace) becomes a "llama"
// (SentencePiece BPE) vocabulary whose scores come from the merge ranks. Throws tessera::Error naming the file
// and the field for anything else (not BPE, not byte-level, an unknown regex or normalizer).
Vocab vocab_from_tokenizer_json(const std::string& path);

}  // namespace tessera
