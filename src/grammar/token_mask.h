// The set of tokens a constraint allows next: one bit per token id. The sampler reads it; the grammar code
// fills it. A plain bitset (n_vocab / 8 bytes: 19 KB for a 151,936-token vocabulary) so that copying a cached
// mask and scanning it for allowed ids cost microseconds.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace tessera::grammar {

class TokenMask {
 public:
  TokenMask() = default;
  explicit TokenMask(int32_t n_vocab) { resize(n_vocab); }

  void resize(int32_t n_vocab) {
    n_ = n_vocab;
    words_.assign(size_t(n_vocab + 63) / 64, 0);
  }
  int32_t size() const { return n_; }

  void clear() { std::memset(words_.data(), 0, words_.size() * sizeof(uint64_t)); }
  void fill() {
    std::memset(words_.data(), 0xff, words_.size() * sizeof(uint64_t));
    if (n_ % 64) words_.back() = (uint64_t(1) << (n_ % 64)) - 1;  // bits past n_vocab stay clear
  }
  void set(int32_t id) { words_[size_t(id) >> 6] |= uint64_t(1) << (id & 63); }
  void reset(int32_t id) { words_[size_t(id) >> 6] &= ~(uint64_t(1) << (id & 63)); }
  bool test(int32_t id) const { return (words_[size_t(id) >> 6] >> (id & 63)) & 1; }

  void merge(const TokenMask& other) {  // this |= other (same size)
    for (size_t i = 0; i < words_.size(); ++i) words_[i] |= other.words_[i];
  }
  bool any() const {
    for (uint64_t w : words_)
      if (w) return true;
    return false;
  }
  int64_t count() const {
    int64_t n = 0;
    for (uint64_t w : words_) n += std::popcount(w);
    return n;
  }
  // Calls f(id) for each allowed id, in increasing order.
  template <typename F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < words_.size(); ++i) {
      for (uint64_t w = words_[i]; w; w &= w - 1) f(int32_t(i * 64 + size_t(std::countr_zero(w))));
    }
  }

  std::span<uint64_t> words() { return words_; }
  std::span<const uint64_t> words() const { return words_; }
  bool operator==(const TokenMask& other) const { return n_ == other.n_ && words_ == other.words_; }

 private:
  int32_t n_ = 0;
  std::vector<uint64_t> words_;
};

}  // namespace tessera::grammar
