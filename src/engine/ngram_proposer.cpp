// Prompt lookup: a backwards scan for the last n tokens, longest n first.
#include "engine/ngram_proposer.h"

#include <algorithm>
#include <chrono>

namespace tessera {

std::vector<int32_t> ngram_lookup(std::span<const int32_t> tokens, int64_t k, int64_t min_n, int64_t max_n) {
  const auto len = int64_t(tokens.size());
  for (int64_t n = std::min(max_n, len - 1); n >= min_n; --n) {
    const auto suffix = tokens.subspan(size_t(len - n));
    // The most recent earlier occurrence: recent text predicts what is being copied now better than old text.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min(k, len - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

void NgramProposer::propose(std::span<DraftSlot> slots) {
  if (slots.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  for (DraftSlot& slot : slots) {
    slot.seq->draft = ngram_lookup(slot.seq->tokens, slot.k, kMinN, kMaxN);
    slot.q->clear();  // point masses
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  seconds_per_seq_ = 0.9 * seconds_per_seq_ + 0.1 * seconds / double(slots.size());
}

double NgramProposer::estimate_seconds(int64_t n_seqs, int64_t) const { return seconds_per_seq_ * double(n_seqs); }

}  // namespace tessera
