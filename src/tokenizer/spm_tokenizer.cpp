// SentencePiece BPE encode/decode. Merging keeps the symbols in a linked list and candidate pairs in a
// priority queue, so a text of n characters costs O(n log n) instead of rescanning all pairs per merge.
#include "tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <limits>
#include <queue>

#include "core/error.h"
#include "core/utf8.h"

namespace tessera {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

// "<0xAB>" -> 0xAB; false for anything else.
bool parse_byte_piece(std::string_view piece, uint8_t& byte) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return false;
  int value = 0;
  for (const char c : piece.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= c - '0';
    } else if (c >= 'A' && c <= 'F') {
      value |= c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      value |= c - 'a' + 10;
    } else {
      return false;
    }
  }
  byte = static_cast<uint8_t>(value);
  return true;
}

std::string unescape_spaces(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    if (piece.substr(pos, kSpaceMark.size()) == kSpaceMark) {
      out.push_back(' ');
      pos += kSpaceMark.size();
    } else {
      out.push_back(piece[pos++]);
    }
  }
  return out;
}

// A run of the input: plain text (token < 0) or one user-defined token found in it.
struct Fragment {
  int32_t token;
  size_t offset;
  size_t length;
};

// One character or merged piece; merged-away symbols keep n == 0. Symbols are contiguous in the text.
struct Symbol {
  size_t start;
  size_t n;
  int32_t prev;  // -1 at the ends
  int32_t next;
};

// A candidate merge of two adjacent symbols. `size` detects stale entries: if either side has changed since
// the pair was queued, their combined length no longer matches.
struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  size_t size;
};

// Highest score first; among equal scores the leftmost pair (SentencePiece and llama.cpp agree on this).
struct BigramBelow {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

SpmTokenizer::SpmTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  validate_vocab(vocab_, "tokenizer");
  const size_t n_vocab = vocab_.tokens.size();

  token_ids_.reserve(n_vocab);
  for (size_t id = 0; id < n_vocab; ++id) {
    if (!vocab_.tokens[id].empty()) token_ids_[vocab_.tokens[id]] = static_cast<int32_t>(id);
  }

  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int byte = 0; byte < 256; ++byte) {
    const char spelled[] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
    int32_t id = find_token(std::string_view(spelled, sizeof(spelled)));
    if (id < 0) id = find_token(std::string_view(std::string(1, static_cast<char>(byte))));
    if (id < 0) id = vocab_.unk;
    if (id < 0)
      fail("tokenizer: vocabulary has no token for byte 0x{:02X} (no <0x{:02X}> piece and no unknown token)", byte,
           byte);
    byte_ids_[byte] = id;
  }

  for (size_t id = 0; id < n_vocab; ++id) {
    if (vocab_.tokens[id].empty()) continue;
    if (vocab_.kinds[id] == TokenKind::UserDefined) user_defined_ids_.push_back(static_cast<int32_t>(id));
    if (vocab_.kinds[id] == TokenKind::UserDefined || vocab_.kinds[id] == TokenKind::Control)
      special_ids_.push_back(static_cast<int32_t>(id));
  }
  // Longest first, so that a user-defined token is never split by a shorter one it contains.
  const auto longer = [&](int32_t a, int32_t b) { return vocab_.tokens[a].size() > vocab_.tokens[b].size(); };
  std::stable_sort(user_defined_ids_.begin(), user_defined_ids_.end(), longer);
  std::stable_sort(special_ids_.begin(), special_ids_.end(), longer);

  pieces_.resize(n_vocab);
  for (size_t id = 0; id < n_vocab; ++id) {
    const std::string& text = vocab_.tokens[id];
    switch (vocab_.kinds[id]) {
      case TokenKind::Normal:
        pieces_[id] = unescape_spaces(text);
        break;
      case TokenKind::UserDefined:
        pieces_[id] = text;  // written into the text verbatim, as llama.cpp does
        break;
      case TokenKind::Byte: {
        uint8_t byte = 0;
        pieces_[id] = parse_byte_piece(text, byte) ? std::string(1, static_cast<char>(byte)) : unescape_spaces(text);
        break;
      }
      case TokenKind::Unknown:
      case TokenKind::Control:
      case TokenKind::Unused:
        break;  // no text: <s>, </s>, <unk> never appear in decoded output
    }
  }

  init_eog_ids(vocab_);
}

int32_t SpmTokenizer::find_token(std::string_view text) const {
  const auto it = token_ids_.find(text);
  return it == token_ids_.end() ? -1 : it->second;
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_bos && vocab_.add_bos) out.push_back(vocab_.bos);

  // User-defined tokens are cut out of the raw text first; control tokens only with parse_special (as
  // llama.cpp), so "<s>" typed by a user stays text.
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({-1, 0, text.size()});
  for (const int32_t id : parse_special ? special_ids_ : user_defined_ids_) {
    const std::string_view piece = vocab_.tokens[id];
    std::vector<Fragment> split;
    for (const Fragment& fragment : fragments) {
      if (fragment.token >= 0) {
        split.push_back(fragment);
        continue;
      }
      const size_t end = fragment.offset + fragment.length;
      const std::string_view region = text.substr(0, end);
      size_t pos = fragment.offset;
      for (size_t hit; (hit = region.find(piece, pos)) != std::string_view::npos; pos = hit + piece.size()) {
        if (hit > pos) split.push_back({-1, pos, hit - pos});
        split.push_back({id, hit, piece.size()});
      }
      if (pos < end) split.push_back({-1, pos, end - pos});
    }
    fragments = std::move(split);
  }

  // The dummy prefix goes in front of the text and of every run that follows a user-defined token.
  bool after_special = true;
  std::string escaped;
  for (const Fragment& fragment : fragments) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      after_special = true;
      continue;
    }
    escaped.clear();
    if (vocab_.add_space_prefix && after_special) escaped.append(kSpaceMark);
    for (const char c : text.substr(fragment.offset, fragment.length)) {
      if (c == ' ') {
        escaped.append(kSpaceMark);
      } else {
        escaped.push_back(c);
      }
    }
    encode_escaped(escaped, out);
    after_special = false;
  }

  if (add_bos && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

void SpmTokenizer::encode_escaped(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail("tokenizer: text of {} bytes is too long to tokenize", text.size());

  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = utf8::char_length(text, pos);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({pos, n, index - 1, pos + n == text.size() ? -1 : index + 1});
    pos += n;
  }

  std::vector<Bigram> storage;
  storage.reserve(symbols.size() * 2);
  std::priority_queue<Bigram, std::vector<Bigram>, BigramBelow> queue(BigramBelow{}, std::move(storage));
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t size = symbols[left].n + symbols[right].n;
    const int32_t id = find_token(text.substr(symbols[left].start, size));
    if (id < 0) return;
    queue.push({vocab_.scores[id], left, right, size});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;  // stale

    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  // Every merged symbol is a token; an unmerged character that is not one falls back to its bytes.
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].start, symbols[i].n);
    const int32_t id = find_token(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (const char c : piece) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
  }
}

std::string SpmTokenizer::token_piece(int32_t id) const {
  if (id < 0 || id >= n_vocab()) fail("token id {} is outside the vocabulary (size {})", id, n_vocab());
  return pieces_[id];
}

std::string SpmTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  bool at_start = true;
  for (const int32_t id : ids) {
    if (id < 0 || id >= n_vocab()) fail("token id {} is outside the vocabulary (size {})", id, n_vocab());
    const std::string& piece = pieces_[id];
    if (piece.empty()) continue;
    // The first piece with text carries the dummy-prefix space (BOS and other control tokens have none).
    if (at_start && vocab_.add_space_prefix && piece.front() == ' ') {
      out.append(piece, 1);
    } else {
      out.append(piece);
    }
    at_start = false;
  }
  return out;
}

}  // namespace tessera
