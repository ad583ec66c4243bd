// Choosing the form of a cached token set.
#include "grammar/token_set.h"

#include <algorithm>

namespace tessera::grammar {

TokenSet::TokenSet(const TokenMask& mask) {
  const int64_t n = mask.count();
  // A list costs 32 bits per member, the bitset one bit per token of the vocabulary.
  if (n * 32 < mask.size()) {
    ids_.reserve(size_t(n));
    mask.for_each([&](int32_t id) { ids_.push_back(id); });
  } else {
    is_dense_ = true;
    dense_ = mask;
  }
}

void TokenSet::add_to(TokenMask& mask) const {
  if (is_dense_) {
    mask.merge(dense_);
  } else {
    for (int32_t id : ids_) mask.set(id);
  }
}

void TokenSet::remove_from(TokenMask& mask) const {
  if (is_dense_) {
    const std::span<const uint64_t> drop = dense_.words();
    const std::span<uint64_t> words = mask.words();
    for (size_t i = 0; i < words.size(); ++i) words[i] &= ~drop[i];
  } else {
    for (int32_t id : ids_) mask.reset(id);
  }
}

bool TokenSet::contains(int32_t id) const {
  return is_dense_ ? dense_.test(id) : std::binary_search(ids_.begin(), ids_.end(), id);
}

int64_t TokenSet::count() const { return is_dense_ ? dense_.count() : int64_t(ids_.size()); }

}  // namespace tessera::grammar
