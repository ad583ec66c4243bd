// Masks over logits rows, and the grammar vocabulary of a tokenizer.
#include "engine/constraint.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

std::shared_ptr<const grammar::Vocabulary> make_grammar_vocabulary(const Tokenizer& tokenizer, int32_t n_vocab) {
  std::vector<std::string> pieces(size_t(std::max(n_vocab, 0)));
  const int32_t n = std::min(n_vocab, tokenizer.n_vocab());
  for (int32_t id = 0; id < n; ++id) pieces[size_t(id)] = tokenizer.token_piece(id);
  std::vector<int32_t> eog;
  for (int32_t id : tokenizer.eog_ids())
    if (id >= 0 && id < n_vocab) eog.push_back(id);
  return std::make_shared<const grammar::Vocabulary>(pieces, eog);
}

SequenceConstraint::SequenceConstraint(std::shared_ptr<const grammar::Constraint> constraint,
                                       std::shared_ptr<const grammar::Vocabulary> vocab, bool ignore_eos)
    : matcher_(std::move(constraint), vocab), vocab_(std::move(vocab)), ignore_eos_(ignore_eos) {}

std::span<const float> SequenceConstraint::apply(std::span<const float> logits) {
  matcher_.fill_mask(mask_);
  if (ignore_eos_)
    for (int32_t id : vocab_->eog_ids()) mask_.reset(id);
  if (!mask_.any()) return {};
  masked_.resize(logits.size());
  constexpr float kBanned = -std::numeric_limits<float>::infinity();
  const std::span<const uint64_t> words = mask_.words();
  const size_t n = std::min(logits.size(), size_t(mask_.size()));
  // Word by word: whole words of allowed or banned tokens (long runs inside strings, or outside them) are a copy
  // or a fill; mixed words go bit by bit.
  for (size_t w = 0; w * 64 < n; ++w) {
    const size_t begin = w * 64, end = std::min(n, begin + 64);
    const uint64_t bits = words[w];
    if (bits == ~uint64_t(0) && end - begin == 64) {
      std::copy(logits.begin() + ptrdiff_t(begin), logits.begin() + ptrdiff_t(end), masked_.begin() + ptrdiff_t(begin));
    } else if (bits == 0) {
      std::fill(masked_.begin() + ptrdiff_t(begin), masked_.begin() + ptrdiff_t(end), kBanned);
    } else {
      for (size_t i = begin; i < end; ++i) masked_[i] = (bits >> (i - begin)) & 1 ? logits[i] : kBanned;
    }
  }
  std::fill(masked_.begin() + ptrdiff_t(n), masked_.end(), kBanned);  // rows longer than the vocabulary
  return masked_;
}

}  // namespace tessera
