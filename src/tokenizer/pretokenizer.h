// Pre-tokenizers of byte-level BPE vocabularies: the split regexes of GPT-2, Llama-3 and Qwen2, written as
// hand scanners over Unicode classes. Each alternative of a regex is tried in order at the current position,
// as leftmost-first regex engines (Rust's regex, Oniguruma, JavaScript) do, and the first that matches wins.
#pragma once

#include <string_view>
#include <vector>

namespace tessera {

enum class PreTokenizer {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|
  // \s+(?!\S)|\s+
  Llama3,
  // Llama3 with \p{N} (one digit per word) instead of \p{N}{1,3}.
  Qwen2,
};

// GGUF's tokenizer.ggml.pre names: "gpt-2"/"gpt2", "llama-bpe"/"llama3", "qwen2", "deepseek-r1-qwen".
// Throws tessera::Error naming the pre-tokenizer when it is none of them.
PreTokenizer pre_tokenizer_from_name(std::string_view name);

// Appends the words of `text` to `words`, in order; together they cover `text` exactly. Bytes that are not
// well-formed UTF-8 count as one "other" character each (like U+FFFD), so any input splits losslessly.
void split_words(PreTokenizer kind, std::string_view text, std::vector<std::string_view>& words);

}  // namespace tessera
