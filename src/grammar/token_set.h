// A cached set of token ids in the cheaper of two forms: a sorted id list when few tokens are in it (a literal's
// position allows a handful), a bitset when many are (inside a JSON string nearly all are).
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/token_mask.h"

namespace tessera::grammar {

class TokenSet {
 public:
  TokenSet() = default;
  explicit TokenSet(const TokenMask& mask);

  void add_to(TokenMask& mask) const;
  void remove_from(TokenMask& mask) const;
  bool contains(int32_t id) const;
  int64_t count() const;
  uint64_t bytes() const { return sizeof(*this) + ids_.size() * sizeof(int32_t) + dense_.words().size() * 8; }

 private:
  bool is_dense_ = false;
  std::vector<int32_t> ids_;  // sparse form, sorted
  TokenMask dense_;
};

}  // namespace tessera::grammar
