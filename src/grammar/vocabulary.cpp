// Sorting the vocabulary and building its preorder byte trie.
#include "grammar/vocabulary.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "core/error.h"

namespace tessera::grammar {
namespace {
std::atomic<uint64_t> next_vocabulary_id{1};
}

Vocabulary::Vocabulary(std::span<const std::string> pieces, std::span<const int32_t> eog_ids)
    : n_vocab_(int32_t(pieces.size())), id_(next_vocabulary_id.fetch_add(1)) {
  eog_ids_.assign(eog_ids.begin(), eog_ids.end());
  std::sort(eog_ids_.begin(), eog_ids_.end());
  eog_ids_.erase(std::unique(eog_ids_.begin(), eog_ids_.end()), eog_ids_.end());
  for (int32_t id = 0; id < n_vocab_; ++id) {
    if (pieces[size_t(id)].empty() || std::binary_search(eog_ids_.begin(), eog_ids_.end(), id)) continue;
    if (pieces[size_t(id)].size() > 0xFFFF) fail("token {} is longer than 65535 bytes", id);
    sorted_ids_.push_back(id);
  }
  std::stable_sort(sorted_ids_.begin(), sorted_ids_.end(),
                   [&](int32_t a, int32_t b) { return pieces[size_t(a)] < pieces[size_t(b)]; });
  rank_.assign(size_t(n_vocab_), std::numeric_limits<uint32_t>::max());
  offsets_.push_back(0);
  for (size_t k = 0; k < sorted_ids_.size(); ++k) {
    const std::string& p = pieces[size_t(sorted_ids_[k])];
    bytes_ += p;
    offsets_.push_back(uint32_t(bytes_.size()));
    rank_[size_t(sorted_ids_[k])] = uint32_t(k);
    max_token_bytes_ = std::max(max_token_bytes_, p.size());
  }

  // Preorder trie: `path[d]` is the open node at depth d + 1; a node closes when a token leaves its prefix.
  std::vector<uint32_t> path;
  auto close_to = [&](size_t depth, uint32_t tokens_so_far) {
    while (path.size() > depth) {
      TrieNode& n = nodes_[path.back()];
      n.subtree_end = uint32_t(nodes_.size());
      n.token_subtree_end = tokens_so_far;
      path.pop_back();
    }
  };
  std::string_view prev;
  for (uint32_t k = 0; k < sorted_ids_.size(); ++k) {
    const std::string_view cur = sorted_bytes(k);
    size_t lcp = 0;
    while (lcp < prev.size() && lcp < cur.size() && prev[lcp] == cur[lcp]) ++lcp;
    close_to(lcp, k);
    while (path.size() < cur.size()) {
      TrieNode n;
      n.byte = uint8_t(cur[path.size()]);
      n.depth = uint16_t(path.size() + 1);
      n.token_begin = n.token_here_end = k;
      path.push_back(uint32_t(nodes_.size()));
      nodes_.push_back(n);
    }
    // Tokens sort before their extensions, so the ones ending at this node are consecutive.
    nodes_[path.back()].token_here_end = k + 1;
    prev = cur;
  }
  close_to(0, uint32_t(sorted_ids_.size()));
}

std::string_view Vocabulary::token_bytes(int32_t id) const {
  if (id < 0 || id >= n_vocab_ || rank_[size_t(id)] == std::numeric_limits<uint32_t>::max()) return {};
  return sorted_bytes(rank_[size_t(id)]);
}

uint64_t Vocabulary::bytes() const {
  return sizeof(*this) + sorted_ids_.size() * 4 + offsets_.size() * 4 + bytes_.size() + rank_.size() * 4 +
         nodes_.size() * sizeof(TrieNode) + eog_ids_.size() * 4;
}

}  // namespace tessera::grammar
