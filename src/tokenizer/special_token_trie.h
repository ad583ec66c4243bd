// Finds special tokens (control and user-defined pieces) spelled in text: a byte trie over the pieces, so the
// longest piece starting at a position costs one walk as deep as the text follows some piece, never a
// comparison against every piece. Comparing each piece at each '<' made a megabyte of '<' cost
// (bytes x pieces) comparisons: seconds for a vocabulary with hundreds of "<|...|>" tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tessera {

class SpecialTokenTrie {
 public:
  struct Match {
    int32_t id = -1;  // -1: no piece starts here
    size_t length = 0;
  };

  // Adds a non-empty `piece` for token `id`. `control`: a control token, matched only when asked for (see
  // longest_match). When one piece is added under several ids, the first added of each kind is kept.
  void add(std::string_view piece, int32_t id, bool control);

  bool empty() const { return nodes_.size() <= 1; }
  // Whether some piece starts with byte `c`: a quick skip for the common case.
  bool may_start(unsigned char c) const { return first_bytes_[c]; }
  // The longest piece that starts at text[pos] (control pieces only when `with_control`). Costs at most the
  // length of the longest piece in steps.
  Match longest_match(std::string_view text, size_t pos, bool with_control) const;

 private:
  struct Node {
    int32_t any_id = -1;       // the first piece ending here, of either kind
    int32_t non_control_id = -1;  // the first non-control piece ending here
    std::vector<uint8_t> labels;  // edge bytes, parallel to `children`
    std::vector<int32_t> children;
  };
  int32_t child(int32_t node, uint8_t byte) const;

  std::vector<Node> nodes_{Node{}};  // nodes_[0] is the root
  std::array<bool, 256> first_bytes_{};
};

}  // namespace tessera
