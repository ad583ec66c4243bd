// The special-token byte trie.
#include "tokenizer/special_token_trie.h"

#include <cstring>

namespace tessera {

int32_t SpecialTokenTrie::child(int32_t node, uint8_t byte) const {
  const Node& n = nodes_[size_t(node)];
  // Most nodes have one or two edges; memchr is as fast as anything for the root's few dozen.
  const void* hit = n.labels.empty() ? nullptr : std::memchr(n.labels.data(), byte, n.labels.size());
  return hit == nullptr ? -1 : n.children[size_t(static_cast<const uint8_t*>(hit) - n.labels.data())];
}

void SpecialTokenTrie::add(std::string_view piece, int32_t id, bool control) {
  if (piece.empty()) return;
  first_bytes_[static_cast<uint8_t>(piece[0])] = true;
  int32_t node = 0;
  for (const char c : piece) {
    const auto byte = static_cast<uint8_t>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = int32_t(nodes_.size());
      nodes_.emplace_back();
      nodes_[size_t(node)].labels.push_back(byte);
      nodes_[size_t(node)].children.push_back(next);
    }
    node = next;
  }
  Node& end = nodes_[size_t(node)];
  if (end.any_id < 0) end.any_id = id;
  if (!control && end.non_control_id < 0) end.non_control_id = id;
}

SpecialTokenTrie::Match SpecialTokenTrie::longest_match(std::string_view text, size_t pos, bool with_control) const {
  Match best;
  if (pos >= text.size() || !first_bytes_[static_cast<uint8_t>(text[pos])]) return best;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<uint8_t>(text[i]));
    if (node < 0) break;
    const Node& n = nodes_[size_t(node)];
    const int32_t id = with_control ? n.any_id : n.non_control_id;
    if (id >= 0) best = {id, i + 1 - pos};
  }
  return best;
}

}  // namespace tessera
