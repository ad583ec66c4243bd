// One byte through a set of parse stacks, and the expansion that keeps every stack's top a consuming state.
#include "grammar/pda.h"

#include <algorithm>
#include <cstring>

namespace tessera::grammar {
namespace {

uint64_t hash_stack(std::span<const int32_t> s) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ s.size();
  for (int32_t x : s) h = (h ^ uint32_t(x)) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

}  // namespace

void StackSet::serialize(std::string& out) const {
  out.clear();
  out.reserve(1 + (cells.size() + ends.size()) * 4);
  out.push_back(accepting ? 'A' : 'a');
  auto put = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  for (uint32_t e : ends) put(e);
  out.push_back('|');
  for (int32_t c : cells) put(uint32_t(c));
}

PdaRunner::PdaRunner(const CompiledGrammar& grammar, PdaLimits limits) : g_(grammar), limits_(limits) {
  seen_table_.assign(64, 0);
}

void PdaRunner::single(int32_t state, StackSet& out) {
  out.clear();
  out.cells.push_back(state);
  out.ends.push_back(1);
}

void PdaRunner::start(StackSet& out) {
  out.clear();
  scratch_.clear();
  work_.clear();
  const int32_t s = g_.rule_start(g_.root_rule());
  push_work({}, {s});
  expand(out);
}

void PdaRunner::push_work(std::span<const int32_t> prefix, std::initializer_list<int32_t> tail) {
  const auto offset = uint32_t(scratch_.size());
  scratch_.insert(scratch_.end(), prefix.begin(), prefix.end());
  scratch_.insert(scratch_.end(), tail.begin(), tail.end());
  work_.push_back({offset, uint32_t(prefix.size() + tail.size())});
}

bool PdaRunner::seen_before(std::span<const int32_t> stack) {
  if (seen_.size() * 2 >= seen_table_.size()) {
    // Grow and rehash.
    std::vector<uint32_t> table(seen_table_.size() * 2, 0);
    used_slots_.clear();
    for (size_t i = 0; i < seen_.size(); ++i) {
      const auto [off, len] = seen_[i];
      size_t slot = hash_stack({seen_cells_.data() + off, len}) & (table.size() - 1);
      while (table[slot]) slot = (slot + 1) & (table.size() - 1);
      table[slot] = uint32_t(i + 1);
      used_slots_.push_back(uint32_t(slot));
    }
    seen_table_ = std::move(table);
  }
  size_t slot = hash_stack(stack) & (seen_table_.size() - 1);
  while (const uint32_t entry = seen_table_[slot]) {
    const auto [off, len] = seen_[entry - 1];
    if (len == stack.size() && std::equal(stack.begin(), stack.end(), seen_cells_.begin() + off)) return true;
    slot = (slot + 1) & (seen_table_.size() - 1);
  }
  seen_.push_back({uint32_t(seen_cells_.size()), uint32_t(stack.size())});
  seen_cells_.insert(seen_cells_.end(), stack.begin(), stack.end());
  seen_table_[slot] = uint32_t(seen_.size());
  used_slots_.push_back(uint32_t(slot));
  return false;
}

void PdaRunner::advance(const StackSet& in, uint8_t byte, StackSet& out) {
  out.clear();
  // The common case (one parse, and the byte leads to a state that only consumes bytes) needs no expansion.
  if (in.size() == 1) {
    last_ = {1, int32_t(in.cells.size()), false};
    const int32_t t = g_.next(in.top(0), byte);
    if (t < 0) return;
    if (g_.flags(t) == CompiledGrammar::kHasBytes) {
      out.cells.assign(in.cells.begin(), in.cells.end());
      out.cells.back() = t;
      out.ends.push_back(uint32_t(out.cells.size()));
      return;
    }
  }
  scratch_.clear();
  work_.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const std::span<const int32_t> s = in.stack(i);
    const int32_t t = g_.next(s.back(), byte);
    if (t >= 0) push_work(s.first(s.size() - 1), {t});
  }
  // Later stacks are expanded first (work_ is a stack); reverse so the output keeps the input's order.
  std::reverse(work_.begin(), work_.end());
  expand(out);
}

void PdaRunner::expand(StackSet& out) {
  // Reset the visited set (only the slots used are cleared: sets are usually tiny).
  for (uint32_t slot : used_slots_) seen_table_[slot] = 0;
  used_slots_.clear();
  seen_.clear();
  seen_cells_.clear();

  last_ = {0, 0, false};
  const size_t max_visits = limits_.max_visits();
  while (!work_.empty()) {
    const auto [off, len] = work_.back();
    work_.pop_back();
    if (seen_before({scratch_.data() + off, len})) continue;
    last_.visits = seen_.size();
    last_.depth = std::max(last_.depth, int32_t(len));
    if (seen_.size() > max_visits || out.size() >= size_t(limits_.max_stacks)) {
      out.clear();  // too ambiguous: treated as dead (see the header)
      last_.limited = true;
      return;
    }
    const int32_t top = scratch_[off + len - 1];
    const uint8_t flags = g_.flags(top);
    if (flags & CompiledGrammar::kHasBytes) {
      out.cells.insert(out.cells.end(), scratch_.begin() + off, scratch_.begin() + off + len);
      out.ends.push_back(uint32_t(out.cells.size()));
    }
    if (flags & CompiledGrammar::kHasCalls) {
      for (const Call& call : g_.calls(top)) {
        if (int32_t(len) + 1 > limits_.max_depth) continue;
        // Copy through a local: push_work may reallocate scratch_.
        const auto prefix_len = len - 1;
        const auto base = uint32_t(scratch_.size());
        scratch_.resize(base + prefix_len + 2);
        std::memmove(scratch_.data() + base, scratch_.data() + off, prefix_len * sizeof(int32_t));
        scratch_[base + prefix_len] = call.ret;
        scratch_[base + prefix_len + 1] = g_.rule_start(call.rule);
        work_.push_back({base, prefix_len + 2});
      }
    }
    if (flags & CompiledGrammar::kFinal) {
      if (len == 1) {
        out.accepting = true;
      } else {
        // Return to the caller: its resume state is the entry below, still to be expanded.
        work_.push_back({off, len - 1});
      }
    }
  }
}

}  // namespace tessera::grammar
