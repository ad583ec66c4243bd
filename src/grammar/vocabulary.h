// A model's tokens as the grammar sees them: each token's bytes, sorted, and laid out as a byte trie in
// preorder, so that a walk over the whole vocabulary shares the work of common prefixes and skips every
// token under a prefix the grammar rejects in one jump. Built once per model (151,936 Qwen3 tokens: ~45 ms)
// and shared by every constrained request.
//
// Tokens with no bytes (control and unused tokens) are never allowed by a grammar; the end-of-generation
// tokens are allowed exactly where the grammar may end.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::grammar {

struct TrieNode {
  uint32_t subtree_end = 0;       // the first node after this node's subtree (preorder)
  uint32_t token_begin = 0;       // sorted tokens: [token_begin, token_here_end) end exactly here,
  uint32_t token_here_end = 0;    // [token_begin, token_subtree_end) are this node's whole subtree
  uint32_t token_subtree_end = 0;
  uint16_t depth = 0;             // bytes from the root (the root itself is not stored)
  uint8_t byte = 0;
};

class Vocabulary {
 public:
  // `pieces[id]`: the bytes token `id` stands for (empty: never allowed). `eog_ids`: end-of-generation tokens.
  Vocabulary(std::span<const std::string> pieces, std::span<const int32_t> eog_ids);

  int32_t n_vocab() const { return n_vocab_; }
  uint64_t id() const { return id_; }  // unique per instance: keys the grammars' mask caches
  std::span<const TrieNode> nodes() const { return nodes_; }
  // Sorted order: position k holds token sorted_ids()[k], whose bytes are sorted_bytes(k).
  std::span<const int32_t> sorted_ids() const { return sorted_ids_; }
  std::string_view sorted_bytes(uint32_t k) const {
    return {bytes_.data() + offsets_[k], size_t(offsets_[k + 1] - offsets_[k])};
  }
  std::string_view token_bytes(int32_t id) const;
  std::span<const int32_t> eog_ids() const { return eog_ids_; }
  size_t max_token_bytes() const { return max_token_bytes_; }
  uint64_t bytes() const;

 private:
  int32_t n_vocab_ = 0;
  uint64_t id_ = 0;
  std::vector<int32_t> sorted_ids_;
  std::vector<uint32_t> offsets_;  // [n_sorted + 1] into bytes_
  std::string bytes_;              // the sorted tokens' bytes, concatenated
  std::vector<uint32_t> rank_;     // [n_vocab] position in sorted order, UINT32_MAX when not in the trie
  std::vector<TrieNode> nodes_;
  std::vector<int32_t> eog_ids_;
  size_t max_token_bytes_ = 0;
};

}  // namespace tessera::grammar
