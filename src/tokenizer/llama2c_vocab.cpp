// llama2.c tokenizer.bin reader.
#include "tokenizer/llama2c_vocab.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"

namespace tessera {
namespace {

// The largest piece any real vocabulary has is a few dozen bytes; this only catches garbage lengths.
constexpr int32_t kMaxPieceBytes = 1 << 16;

bool is_byte_piece(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return false;
  const auto is_hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f'); };
  return is_hex(piece[3]) && is_hex(piece[4]);
}

}  // namespace

Vocab vocab_from_llama2c(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open llama2.c tokenizer file", path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("{}: read error", path);

  size_t offset = 0;
  const auto read = [&](void* dst, size_t n, const char* what) {
    if (bytes.size() - offset < n)
      fail("{}: truncated llama2.c tokenizer: {} at offset {} needs {} bytes, {} left", path, what, offset, n,
           bytes.size() - offset);
    std::memcpy(dst, bytes.data() + offset, n);
    offset += n;
  };

  int32_t max_token_length = 0;
  read(&max_token_length, sizeof(max_token_length), "max_token_length");
  if (max_token_length <= 0 || max_token_length > kMaxPieceBytes)
    fail("{}: not a llama2.c tokenizer (max_token_length {})", path, max_token_length);

  Vocab vocab;
  vocab.model = "llama";
  while (offset < bytes.size()) {
    const size_t id = vocab.tokens.size();
    float score = 0.0f;
    int32_t length = 0;
    read(&score, sizeof(score), "score");
    read(&length, sizeof(length), "piece length");
    if (length < 0 || length > kMaxPieceBytes)
      fail("{}: token {} has invalid length {} (offset {})", path, id, length, offset - 4);
    std::string piece(static_cast<size_t>(length), '\0');
    read(piece.data(), piece.size(), "piece");

    TokenKind kind = TokenKind::Normal;
    if (id == 0) {
      piece = "<unk>";
      kind = TokenKind::Unknown;
    } else if (id == 1) {
      piece = "<s>";
      kind = TokenKind::Control;
    } else if (id == 2) {
      piece = "</s>";
      kind = TokenKind::Control;
    } else if (is_byte_piece(piece)) {
      kind = TokenKind::Byte;
    } else if (piece.empty()) {
      kind = TokenKind::Control;  // nothing to match in text
    } else {
      std::string escaped;
      for (const char c : piece) {
        if (c == ' ') {
          escaped += "\xE2\x96\x81";
        } else {
          escaped.push_back(c);
        }
      }
      piece = std::move(escaped);
    }
    vocab.tokens.push_back(std::move(piece));
    vocab.scores.push_back(score);
    vocab.kinds.push_back(kind);
  }
  if (vocab.tokens.size() < 3) fail("{}: llama2.c tokenizer has only {} tokens", path, vocab.tokens.size());

  vocab.unk = 0;
  vocab.bos = 1;
  vocab.eos = 2;
  vocab.add_bos = true;
  vocab.add_eos = false;
  vocab.add_space_prefix = true;
  validate_vocab(vocab, path);
  return vocab;
}

}  // namespace tessera
