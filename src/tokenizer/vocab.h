// Tokenizer vocabulary as GGUF stores it (tokenizer.ggml.*): pieces, scores, token types and special ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

namespace gguf {
class File;
}

// GGUF token_type ids (tokenizer.ggml.token_type); do not renumber.
enum class TokenKind : int32_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

// Pieces follow the GGUF/SentencePiece convention: a space is stored as U+2581 ("▁") and a byte-fallback
// token is spelled "<0xAB>". tokens, scores and kinds always have the same length (n_vocab).
struct Vocab {
  std::string model;                               // tokenizer.ggml.model: "llama" (SentencePiece BPE), "gpt2", ...
  std::vector<std::string> tokens;                 // [n_vocab]
  std::vector<float> scores;                       // [n_vocab] merge priority: higher merges first
  std::vector<TokenKind> kinds;                    // [n_vocab]
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;  // -1 when the vocabulary has none
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;  // SentencePiece's dummy prefix: " " before non-empty text
  // Byte-level BPE ("gpt2") only: merge rules "left right" in rank order (first merges first), spelled in the
  // GPT-2 byte-to-unicode alphabet like the tokens, and the pre-tokenizer name (tokenizer.ggml.pre).
  std::vector<std::string> merges;
  std::string pre;
  // Further end-of-generation ids the model's files name (Hugging Face generation_config.json's eos_token_id
  // list, e.g. Llama-3.1's <|eom_id|> and <|eot_id|>), beyond `eos`. GGUF has no standard key for a list, so
  // Tessera stores it as "tessera.eog_token_ids"; other tools find these tokens by their text.
  std::vector<int32_t> eog_ids;
  // The model's Jinja chat template (GGUF tokenizer.chat_template, or chat_template in a Hugging Face
  // tokenizer_config.json); empty when the model has none. The server renders chat prompts with it.
  std::string chat_template;
};

// Reads the tokenizer.ggml.* keys. Throws tessera::Error naming the key when data is missing or inconsistent
// (arrays of different lengths, special ids out of range, wrong value types).
Vocab vocab_from_gguf(const gguf::File& file);

// Checks the invariants above; throws tessera::Error prefixed with `source` (a file name) when one fails.
void validate_vocab(const Vocab& vocab, const std::string& source);

// Empty when `a` and `b` map every id to the same token and agree on the special ids (two models may then
// exchange token ids: a draft proposing for a target); else the first difference, e.g. "token 17: 'ab' vs 'a'".
std::string vocab_difference(const Vocab& a, const Vocab& b);

}  // namespace tessera
