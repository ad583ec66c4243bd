// Byte-level BPE encode/decode. A word's symbols form a linked list and candidate pairs wait in a priority
// queue ordered by merge rank, then position (as Hugging Face tokenizers orders them), so a word of n bytes
// costs O(n log n); stale queue entries are recognized by the ids they were queued with.
#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <limits>
#include <queue>

#include "core/error.h"
#include "core/utf8.h"

namespace tessera {
namespace {

struct ByteAlphabet {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // every mapped code point is below 256 + 68

  ByteAlphabet() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet table;
  return table;
}

// Raw bytes -> the byte alphabet (what vocabulary pieces are spelled in).
std::string to_alphabet(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) utf8::append(out, alphabet().to_cp[static_cast<uint8_t>(c)]);
  return out;
}

// The byte alphabet -> raw bytes; characters outside the alphabet are kept as they are.
std::string from_alphabet(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const utf8::Seq seq = utf8::scan(text, pos);
    if (seq.state == utf8::SeqState::Valid && seq.length == 2) {
      const uint32_t cp = ((static_cast<uint8_t>(text[pos]) & 0x1F) << 6) | (static_cast<uint8_t>(text[pos + 1]) & 0x3F);
      if (cp < alphabet().to_byte.size() && alphabet().to_byte[cp] >= 0) {
        out.push_back(static_cast<char>(alphabet().to_byte[cp]));
        pos += 2;
        continue;
      }
    } else if (seq.state == utf8::SeqState::Valid && seq.length == 1 && alphabet().to_byte[static_cast<uint8_t>(text[pos])] >= 0) {
      out.push_back(text[pos]);
      pos += 1;
      continue;
    }
    const size_t n = std::max<size_t>(seq.length, 1);
    out.append(text.substr(pos, n));
    pos += n;
  }
  return out;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Symbol {
  int32_t id;
  int32_t prev;  // -1 at the ends
  int32_t next;
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t left;  // symbol index; symbols are indexed by their first byte, so this is also the position
  int32_t right;
  int32_t left_id;  // ids when queued: a merge on either side since then makes the entry stale
  int32_t right_id;
  int32_t result;
};

struct CandidateAfter {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

uint32_t byte_to_unicode(uint8_t byte) { return alphabet().to_cp[byte]; }

int unicode_to_byte(uint32_t cp) { return cp < alphabet().to_byte.size() ? alphabet().to_byte[cp] : -1; }

bool BpeTokenizer::WordCache::find(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxWordBytes) return false;
  Shard& shard = shards_[std::hash<std::string_view>{}(word) % kShards];
  std::lock_guard lock(shard.mutex);
  const auto it = shard.words.find(word);
  if (it == shard.words.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void BpeTokenizer::WordCache::insert(std::string_view word, const int32_t* ids, size_t n_ids) const {
  if (word.size() > kMaxWordBytes) return;
  Shard& shard = shards_[std::hash<std::string_view>{}(word) % kShards];
  std::lock_guard lock(shard.mutex);
  if (shard.words.size() >= kMaxWordsPerShard) shard.words.clear();
  shard.words.emplace(std::string(word), std::vector<int32_t>(ids, ids + n_ids));
}

BpeTokenizer::BpeTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  validate_vocab(vocab_, "tokenizer");
  pre_ = pre_tokenizer_from_name(vocab_.pre.empty() ? "gpt-2" : vocab_.pre);
  ignore_merges_ = pre_ == PreTokenizer::Llama3;
  const size_t n_vocab = vocab_.tokens.size();

  token_ids_.reserve(n_vocab);
  for (size_t id = 0; id < n_vocab; ++id) {
    const TokenKind kind = vocab_.kinds[id];
    if (kind == TokenKind::Normal || kind == TokenKind::Byte) token_ids_[vocab_.tokens[id]] = static_cast<int32_t>(id);
  }
  for (int b = 0; b < 256; ++b) {
    int32_t id = find_token(to_alphabet(std::string(1, static_cast<char>(b))));
    byte_ids_[b] = id >= 0 ? id : vocab_.unk;
  }

  merges_.reserve(vocab_.merges.size());
  for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
    const std::string_view merge = vocab_.merges[rank];
    // A piece never starts with a space in the byte alphabet, so the separator is the first space after it.
    const size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos)
      fail("tokenizer: merge {} '{}' is not two pieces separated by a space", rank, merge);
    const std::string_view left = merge.substr(0, space);
    const std::string_view right = merge.substr(space + 1);
    const int32_t left_id = find_token(left);
    const int32_t right_id = find_token(right);
    const int32_t result = find_token(std::string(left) + std::string(right));
    if (left_id < 0 || right_id < 0 || result < 0) continue;  // cannot apply: llama.cpp skips these too
    if (rank > static_cast<size_t>(std::numeric_limits<int32_t>::max())) fail("tokenizer: too many merges");
    merges_.try_emplace(pair_key(left_id, right_id), Merge{static_cast<int32_t>(rank), result});
  }

  pieces_.resize(n_vocab);
  for (size_t id = 0; id < n_vocab; ++id) {
    switch (vocab_.kinds[id]) {
      case TokenKind::Normal:
      case TokenKind::Byte:
        pieces_[id] = from_alphabet(vocab_.tokens[id]);
        break;
      case TokenKind::UserDefined:
        pieces_[id] = vocab_.tokens[id];
        break;
      case TokenKind::Unknown:
      case TokenKind::Control:
      case TokenKind::Unused:
        break;
    }
  }

  for (size_t id = 0; id < n_vocab; ++id) {
    const TokenKind kind = vocab_.kinds[id];
    if (kind == TokenKind::Control || kind == TokenKind::UserDefined)
      specials_.add(vocab_.tokens[id], static_cast<int32_t>(id), kind == TokenKind::Control);
  }

  init_eog_ids(vocab_);
}

int32_t BpeTokenizer::find_token(std::string_view text) const {
  const auto it = token_ids_.find(text);
  return it == token_ids_.end() ? -1 : it->second;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && vocab_.add_bos) out.push_back(vocab_.bos);

  // Leftmost-longest match of added tokens, as Hugging Face's added-token splitter does.
  size_t plain_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const SpecialTokenTrie::Match match = specials_.longest_match(text, pos, parse_special);
    if (match.id < 0) {
      ++pos;
      continue;
    }
    encode_plain(text.substr(plain_start, pos - plain_start), out);
    out.push_back(match.id);
    pos += match.length;
    plain_start = pos;
  }
  encode_plain(text.substr(plain_start), out);

  if (add_bos && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    fail("tokenizer: text of {} bytes is too long to tokenize", text.size());
  std::vector<std::string_view> words;
  words.reserve(text.size() / 4 + 1);
  split_words(pre_, text, words);
  for (const std::string_view word : words) encode_word(word, out);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(word[0])];
    if (id >= 0) out.push_back(id);
    return;
  }
  if (cache_.find(word, out)) return;
  const size_t start = out.size();
  merge_word(word, out);
  cache_.insert(word, out.data() + start, out.size() - start);
}

void BpeTokenizer::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    const int32_t id = find_token(to_alphabet(word));
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }

  const auto n = static_cast<int32_t>(word.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) symbols[i] = {byte_ids_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};

  std::vector<Candidate> storage;
  storage.reserve(static_cast<size_t>(n) * 2);
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateAfter> queue(CandidateAfter{}, std::move(storage));
  const auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t left_id = symbols[left].id;
    const int32_t right_id = symbols[right].id;
    if (left_id < 0 || right_id < 0) return;
    const auto it = merges_.find(pair_key(left_id, right_id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, left_id, right_id, it->second.result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) try_add(i, i + 1);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    if (!left.alive || !right.alive || left.next != c.right || left.id != c.left_id || right.id != c.right_id)
      continue;  // stale
    left.id = c.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    try_add(left.prev, c.left);
    try_add(c.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    if (symbols[i].id >= 0) out.push_back(symbols[i].id);  // a byte without a token (and no <unk>) is dropped
  }
}

std::string BpeTokenizer::token_piece(int32_t id) const {
  if (id < 0 || id >= n_vocab()) fail("token id {} is outside the vocabulary (size {})", id, n_vocab());
  return pieces_[id];
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (id < 0 || id >= n_vocab()) fail("token id {} is outside the vocabulary (size {})", id, n_vocab());
    out.append(pieces_[id]);
  }
  return out;
}

}  // namespace tessera
