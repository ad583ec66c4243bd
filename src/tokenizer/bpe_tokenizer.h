// Byte-level BPE (tokenizer.ggml.model = "gpt2": GPT-2, Llama-3, Qwen2/2.5/3) with the semantics of Hugging Face
// tokenizers, which llama.cpp's test vectors come from: text is cut at added/special tokens, split into words by
// the vocabulary's pre-tokenizer regex, each word's bytes are spelled in GPT-2's byte-to-unicode alphabet and
// merged pair by pair in merge-rank order.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_token_trie.h"
#include "tokenizer/token_map.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

// GPT-2's reversible byte <-> code point map: printable bytes stand for themselves, the others (controls,
// space, 0x7F-0xA0, 0xAD) for U+0100 onwards, so that every token is printable text.
uint32_t byte_to_unicode(uint8_t byte);
// The byte a code point stands for, or -1 when it is not in the alphabet.
int unicode_to_byte(uint32_t cp);

class BpeTokenizer final : public Tokenizer {
 public:
  // Throws tessera::Error for an unknown pre-tokenizer or merges that do not parse.
  explicit BpeTokenizer(Vocab vocab);

  using Tokenizer::encode;
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override;
  // Raw bytes: the token's characters mapped back through the byte alphabet. User-defined tokens are their
  // text verbatim; control, unknown and unused tokens have no text.
  std::string token_piece(int32_t id) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  using StringMap = TokenIdMap;

  struct Merge {
    int32_t rank;    // position in the merge list: lower merges first
    int32_t result;  // token id of the merged pair
  };

  // Words seen before, with their ids: text repeats most words, and a lookup is far cheaper than merging.
  // Sharded so that threads encoding at once rarely wait on the same lock; a full shard is simply emptied.
  class WordCache {
   public:
    bool find(std::string_view word, std::vector<int32_t>& out) const;
    void insert(std::string_view word, const int32_t* ids, size_t n_ids) const;

   private:
    static constexpr size_t kShards = 16;
    static constexpr size_t kMaxWordsPerShard = 1 << 15;
    static constexpr size_t kMaxWordBytes = 64;  // longer words are rare and would crowd the cache
    struct Shard {
      std::mutex mutex;
      std::unordered_map<std::string, std::vector<int32_t>, TransparentStringHash, std::equal_to<>> words;
    };
    mutable std::array<Shard, kShards> shards_;
  };

  // Splits plain text (no special tokens in it) into words and appends their ids.
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // BPE over the word's bytes; appends the resulting ids.
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t find_token(std::string_view text) const;

  Vocab vocab_;
  PreTokenizer pre_;
  // Llama-3 (Hugging Face's ignore_merges): a word that is a token as a whole is that token, even where the
  // merges would have cut it differently.
  bool ignore_merges_;
  StringMap token_ids_;                     // Normal/Byte tokens by text (byte alphabet); last id wins
  std::array<int32_t, 256> byte_ids_{};     // the one-character token of each byte; -1 when missing
  std::unordered_map<uint64_t, Merge> merges_;  // key: left id << 32 | right id
  std::vector<std::string> pieces_;         // [n_vocab] what token_piece returns
  // Added tokens (user-defined: always cut out of the text; control: only with parse_special); the longest
  // one wins, so that one never splits a longer one it is a prefix of.
  SpecialTokenTrie specials_;
  WordCache cache_;
};

}  // namespace tessera
