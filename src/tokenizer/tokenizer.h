// Text <-> token ids. src/tokenizer holds the vocabularies (GGUF, llama2.c, tokenizer.json), the
// SentencePiece-BPE and byte-level BPE tokenizers and the streaming detokenizer; model and engine code only sees this header.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tessera {

// Abstract so that a byte-level BPE (tokenizer.ggml.model = "gpt2") can sit beside SentencePiece.
// Implementations are immutable after construction: one instance may be shared by all threads.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids for `text`, which may be any bytes (invalid UTF-8 falls back to byte tokens). `add_bos` adds
  // the special tokens the vocabulary asks for: BOS when vocab().add_bos, EOS when vocab().add_eos (as
  // llama.cpp's add_special). User-defined tokens written in the text are always matched; control tokens
  // ("<s>", "<|im_start|>") only with parse_special (llama.cpp's parse_special: for rendered chat templates),
  // otherwise they are tokenized as plain text.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const = 0;
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const { return encode(text, add_bos, false); }
  // The raw bytes one token stands for: "▁" becomes a space, "<0xAB>" the byte 0xAB, control, unknown and
  // unused tokens nothing. A piece may be part of a UTF-8 sequence. Throws tessera::Error for an id out of range.
  virtual std::string token_piece(int32_t id) const = 0;
  // Concatenated pieces, without the space the tokenizer itself put in front of the text (add_space_prefix).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual const Vocab& vocab() const = 0;

  int32_t n_vocab() const { return static_cast<int32_t>(vocab().tokens.size()); }
  // End of generation: EOS and the end-of-turn tokens chat models emit (<|end|>, <|eot_id|>, <|im_end|>, ...).
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }

 protected:
  // Implementations call this once their vocabulary is final.
  void init_eog_ids(const Vocab& vocab);

 private:
  std::vector<int32_t> eog_ids_;  // sorted, unique
};

// Picks the implementation for vocab.model ("llama" = SentencePiece BPE, "gpt2" = byte-level BPE). Throws tessera::Error for an
// inconsistent vocabulary or a tokenizer model that is not supported.
std::unique_ptr<Tokenizer> make_tokenizer(Vocab vocab);

// Streaming detokenizer: feed ids one at a time and get text that is always valid UTF-8. Bytes of a
// multi-byte character split across byte tokens are held back until the character is complete; bytes that
// can no longer become a valid character are replaced by U+FFFD as soon as that is certain. Concatenating
// every push() and the final flush() gives decode() of the whole sequence (when that is valid UTF-8).
class IncrementalDecoder {
 public:
  // skip_leading_space: drop the space the tokenizer prepends to the text (only when vocab().add_space_prefix),
  // as decode() does; pass false when continuing a stream whose first token was already decoded.
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_leading_space = true);

  std::string push(int32_t id);
  // Emits what is held back (an incomplete sequence becomes U+FFFD); call at the end of the stream.
  std::string flush();

 private:
  const Tokenizer& tokenizer_;
  bool skip_leading_space_;
  bool at_start_ = true;  // no token with a non-empty piece seen yet
  std::string pending_;   // an incomplete UTF-8 sequence: at most 3 bytes
};

}  // namespace tessera
