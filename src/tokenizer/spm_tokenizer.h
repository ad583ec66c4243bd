// SentencePiece BPE over a GGUF "llama" vocabulary, with llama.cpp's semantics (the reference the test
// vectors come from): spaces become "▁", a "▁" is prepended to the text, characters are merged greedily by
// the score of the merged piece, and whatever is not a token falls back to <0xXX> byte tokens.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/token_map.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

class SpmTokenizer final : public Tokenizer {
 public:
  // Throws tessera::Error when a byte has neither a <0xXX> token nor an unknown token to fall back to.
  explicit SpmTokenizer(Vocab vocab);

  using Tokenizer::encode;
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override;
  std::string token_piece(int32_t id) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  // Tokenizes one run of plain text whose spaces are already "▁"; appends to `out`.
  void encode_escaped(std::string_view text, std::vector<int32_t>& out) const;
  int32_t find_token(std::string_view text) const;

  Vocab vocab_;
  // Every piece, whatever its kind, as llama.cpp looks them up; a duplicated piece maps to its last id.
  TokenIdMap token_ids_;
  std::array<int32_t, 256> byte_ids_{};    // byte-fallback token per byte value
  std::vector<int32_t> user_defined_ids_;  // matched in the text before BPE: longest piece first
  std::vector<int32_t> special_ids_;       // user-defined and control: matched with parse_special
  std::vector<std::string> pieces_;        // [n_vocab] what token_piece returns
};

}  // namespace tessera
