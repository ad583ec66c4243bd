// Code point range sets.
#include "grammar/code_point_set.h"

#include <algorithm>

namespace tessera::grammar {
namespace {
constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;
}

CodePointSet CodePointSet::range(uint32_t lo, uint32_t hi) {
  CodePointSet s;
  s.add(lo, hi);
  return s;
}

CodePointSet CodePointSet::all() { return range(0, kMaxCodePoint); }

void CodePointSet::add(uint32_t lo, uint32_t hi) {
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi) return;
  // Surrogates are cut out here, so that no set ever holds one.
  if (lo < kSurrogateLo && hi > kSurrogateHi) {
    ranges_.push_back({lo, kSurrogateLo - 1});
    ranges_.push_back({kSurrogateHi + 1, hi});
  } else if (lo >= kSurrogateLo && hi <= kSurrogateHi) {
    return;
  } else if (lo >= kSurrogateLo && lo <= kSurrogateHi) {
    ranges_.push_back({kSurrogateHi + 1, hi});
  } else if (hi >= kSurrogateLo && hi <= kSurrogateHi) {
    ranges_.push_back({lo, kSurrogateLo - 1});
  } else {
    ranges_.push_back({lo, hi});
  }
  normalize();
}

void CodePointSet::add(const CodePointSet& other) {
  ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
  normalize();
}

void CodePointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end(), [](const CodePointRange& a, const CodePointRange& b) { return a.lo < b.lo; });
  std::vector<CodePointRange> merged;
  for (const CodePointRange& r : ranges_) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet out;
  uint32_t next = 0;
  for (const CodePointRange& r : ranges_) {
    if (r.lo > next) out.ranges_.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.ranges_.push_back({next, kMaxCodePoint});
  // Re-add through add() to cut the surrogates out of the gaps.
  CodePointSet clean;
  for (const CodePointRange& r : out.ranges_) clean.add(r.lo, r.hi);
  return clean;
}

CodePointSet CodePointSet::minus(const CodePointSet& other) const {
  CodePointSet out;
  const CodePointSet keep = other.complement();
  // Intersection of two sorted range lists.
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < keep.ranges_.size()) {
    const uint32_t lo = std::max(ranges_[i].lo, keep.ranges_[j].lo);
    const uint32_t hi = std::min(ranges_[i].hi, keep.ranges_[j].hi);
    if (lo <= hi) out.ranges_.push_back({lo, hi});
    (ranges_[i].hi < keep.ranges_[j].hi ? i : j)++;
  }
  return out;
}

bool CodePointSet::contains(uint32_t c) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), c,
                             [](uint32_t v, const CodePointRange& r) { return v < r.lo; });
  return it != ranges_.begin() && std::prev(it)->hi >= c;
}

uint64_t CodePointSet::size() const {
  uint64_t n = 0;
  for (const CodePointRange& r : ranges_) n += uint64_t(r.hi - r.lo) + 1;
  return n;
}

}  // namespace tessera::grammar
