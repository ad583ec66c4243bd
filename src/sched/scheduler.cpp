// The scheduling policy. Order of work in one step (continuous mode):
//   1. priority preemption: a waiting request of a higher class displaces the lowest running one when the
//      sequence limit or the pool is full;
//   2. running sequences, highest priority first, each get their next chunk (one token when decoding) while
//      the token budget lasts; when blocks run out, the lowest-priority, most recently admitted sequence is
//      preempted (blocks freed, recomputed later — its full blocks stay in the prefix cache, so usually cheap);
//   3. waiting sequences are admitted in (priority, arrival) order while budget, sequence slots and blocks last,
//      reusing cached prefix blocks; the first one that does not fit stops admission (no overtaking in FCFS).
#include "sched/scheduler.h"

#include <algorithm>

#include "core/check.h"

namespace tessera {
namespace {

bool waiting_before(const Sequence* a, const Sequence* b) {
  return a->priority != b->priority ? a->priority < b->priority : a->arrival < b->arrival;
}

bool running_before(const Sequence* a, const Sequence* b) {
  return a->priority != b->priority ? a->priority < b->priority : a->admitted < b->admitted;
}

}  // namespace

const char* scheduling_policy_name(SchedulingPolicy policy) {
  switch (policy) {
    case SchedulingPolicy::Continuous: return "continuous";
    case SchedulingPolicy::Static: return "static";
    case SchedulingPolicy::Window: return "window";
  }
  return "unknown";
}

Scheduler::Scheduler(BlockManager& blocks, SchedulerOptions options) : blocks_(blocks), options_(options) {}

void Scheduler::insert_waiting(Sequence* seq) {
  seq->status = SeqStatus::Waiting;
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), seq, waiting_before), seq);
}

void Scheduler::add(Sequence* seq, std::chrono::steady_clock::time_point now) {
  seq->enqueued_at = now;
  insert_waiting(seq);
}

void Scheduler::add_running(Sequence* seq) {
  seq->status = SeqStatus::Running;
  seq->admitted = ++admit_counter_;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, running_before), seq);
}

void Scheduler::free_blocks(Sequence* seq) {
  // Release in reverse so a sequence's tail blocks are evicted before its (more shareable) head blocks.
  for (auto it = seq->block_table.rbegin(); it != seq->block_table.rend(); ++it) blocks_.release(*it);
  seq->block_table.clear();
  seq->block_hashes.clear();
}

void Scheduler::remove(Sequence* seq) {
  if (auto it = std::find(batch_pending_.begin(), batch_pending_.end(), seq); it != batch_pending_.end()) {
    batch_pending_.erase(it);
  }
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) waiting_.erase(it);
  free_blocks(seq);
  seq->status = SeqStatus::Finished;
}

Sequence* Scheduler::lowest_running() const { return running_.empty() ? nullptr : running_.back(); }

void Scheduler::preempt(Sequence* seq, StepPlan& plan) {
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  free_blocks(seq);
  seq->draft.clear();
  seq->n_computed = 0;
  ++seq->n_preemptions;
  insert_waiting(seq);  // keeps its place: ordered by original arrival
  plan.preempted.push_back(seq);
}

bool Scheduler::grow_blocks(Sequence* seq, int64_t n_positions, StepPlan& plan) {
  const int64_t bs = blocks_.block_size();
  // Copy-on-write: the block the next token goes into may be shared with a forked sequence.
  if (seq->n_computed % bs != 0) {
    const auto idx = size_t(seq->n_computed / bs);
    if (idx < seq->block_table.size() && blocks_.ref_count(seq->block_table[idx]) > 1) {
      const auto fresh = blocks_.allocate();
      if (!fresh) return false;
      plan.copies.push_back({seq->block_table[idx], *fresh, seq->n_computed % bs});
      blocks_.release(seq->block_table[idx]);
      seq->block_table[idx] = *fresh;
    }
  }
  while (int64_t(seq->block_table.size()) < blocks_for(n_positions)) {
    const auto block = blocks_.allocate();
    if (!block) return false;
    seq->block_table.push_back(*block);
  }
  return true;
}

bool Scheduler::admit(Sequence* seq, int64_t& budget, StepPlan& plan) {
  if (seq->n_computed == 0 && seq->block_table.empty() && !seq->all_logits) {
    // Reuse cached full blocks of the prefix, always leaving at least one token to compute for logits.
    const auto max_blocks = (int64_t(seq->tokens.size()) - 1) / blocks_.block_size();
    seq->block_table = blocks_.match_prefix(seq->tokens, max_blocks, seq->prefix_seed);
    seq->n_computed = int64_t(seq->block_table.size()) * blocks_.block_size();
    BlockHash parent = seq->prefix_seed;
    for (size_t i = 0; i < seq->block_table.size(); ++i) {
      const auto block_tokens = std::span<const int32_t>(seq->tokens).subspan(i * size_t(blocks_.block_size()),
                                                                              size_t(blocks_.block_size()));
      parent = hash_block(parent, block_tokens);
      seq->block_hashes.push_back(parent);
    }
    if (!seq->ever_scheduled) seq->n_cached_prompt_tokens = seq->n_computed;
  }
  const int64_t n = std::min(seq->n_uncomputed(), budget);
  if (n <= 0 || !grow_blocks(seq, seq->n_computed + n, plan)) {
    free_blocks(seq);  // give back the matched prefix; it stays cached
    seq->n_computed = 0;
    return false;
  }
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), seq));
  seq->status = SeqStatus::Running;
  seq->admitted = ++admit_counter_;
  seq->ever_scheduled = true;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, running_before), seq);
  add_chunk(plan, seq, n);
  budget -= n;
  return true;
}

void Scheduler::add_chunk(StepPlan& plan, Sequence* seq, int64_t n, int64_t n_draft) {
  ScheduledChunk c;
  c.seq = seq;
  c.first = seq->n_computed;
  c.n_tokens = n;
  c.n_draft = n_draft;
  c.completes = c.first + n - n_draft == int64_t(seq->tokens.size());
  c.n_logits = seq->all_logits ? n : c.completes ? 1 + n_draft : 0;
  c.logits_row = plan.n_logits;
  plan.chunks.push_back(c);
  plan.n_tokens += n;
  plan.n_logits += c.n_logits;
  plan.n_draft += n_draft;
}

int64_t Scheduler::draft_that_fits(Sequence* seq, int64_t budget, int64_t n_after, StepPlan& plan) {
  if (seq->draft.empty()) return 0;
  const int64_t room = seq->max_len - int64_t(seq->tokens.size()) - 1;  // the bonus token takes the last slot
  // Drafts never take the budget that the running sequences after this one need for their own next token.
  int64_t n = std::min({int64_t(seq->draft.size()), budget - 1 - n_after, room});
  if (n > 0 && int64_t(seq->block_table.size()) < blocks_for(seq->n_computed + 1 + n) &&
      blocks_.n_free() < blocks_for(seq->n_computed + 1 + n) - int64_t(seq->block_table.size())) {
    n = 0;  // the pool is short: verifying is an optimization, never worth a preemption
  }
  if (n <= 0) {
    seq->draft.clear();
    return 0;
  }
  seq->draft.resize(size_t(n));
  if (!grow_blocks(seq, seq->n_computed + 1 + n, plan)) {  // a copy-on-write of a shared block took the last one
    seq->draft.clear();
    return 0;
  }
  return n;
}

void Scheduler::trim_blocks(Sequence* seq) {
  const auto keep = size_t(blocks_for(std::max<int64_t>(int64_t(seq->tokens.size()), seq->n_computed)));
  while (seq->block_table.size() > keep) {
    blocks_.release(seq->block_table.back());
    seq->block_table.pop_back();
  }
}

StepPlan Scheduler::schedule(std::chrono::steady_clock::time_point now) {
  StepPlan plan;
  int64_t budget = options_.max_batched_tokens;
  wake_deadline_ = std::chrono::steady_clock::time_point::max();
  const bool batch_policy = options_.policy != SchedulingPolicy::Continuous;

  // 1. Priority preemption (continuous only: the batch policies run a batch to completion by definition).
  if (!batch_policy) {
    for (Sequence* w : std::vector<Sequence*>(waiting_.begin(), waiting_.end())) {
      Sequence* low = lowest_running();
      if (low == nullptr || w->priority >= low->priority) break;
      const int64_t first_chunk = std::min<int64_t>(int64_t(w->tokens.size()), budget);
      const bool no_slot = int64_t(running_.size()) >= options_.max_seqs;
      const bool no_blocks = blocks_.n_free() < blocks_for(first_chunk);
      if (!no_slot && !no_blocks) break;
      preempt(low, plan);
    }
  }

  // 2. Running sequences continue; a decoding one with a draft verifies it in the same chunk.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int64_t n = std::min(seq->n_uncomputed(), budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    if (n == 1 && seq->decoding()) {
      const auto n_after = int64_t(running_.size() - i - 1);
      if (const int64_t n_draft = draft_that_fits(seq, budget, n_after, plan); n_draft > 0) {
        add_chunk(plan, seq, 1 + n_draft, n_draft);
        budget -= 1 + n_draft;
        ++i;
        continue;
      }
    } else {
      seq->draft.clear();
    }
    bool placed = true;
    while (!grow_blocks(seq, seq->n_computed + n, plan)) {
      Sequence* victim = lowest_running();
      preempt(victim, plan);
      if (victim == seq) {
        placed = false;
        break;
      }
    }
    if (!placed) continue;  // `seq` itself went back to waiting; running_[i] is now the next one
    add_chunk(plan, seq, n);
    budget -= n;
    ++i;
  }

  // 3. Admission.
  if (batch_policy) {
    if (running_.empty() && batch_pending_.empty() && !waiting_.empty()) {
      // Form the next batch from the requests waiting now; later arrivals wait for the batch after it.
      const int64_t batch = options_.policy == SchedulingPolicy::Static
                                ? options_.max_seqs
                                : std::min<int64_t>(options_.batch_size, options_.max_seqs);
      if (options_.policy == SchedulingPolicy::Window && int64_t(waiting_.size()) < batch) {
        const auto oldest = std::min_element(waiting_.begin(), waiting_.end(), [](auto* a, auto* b) {
          return a->enqueued_at < b->enqueued_at;
        });
        const auto give_up = (*oldest)->enqueued_at + std::chrono::milliseconds(options_.max_wait_ms);
        if (now < give_up) {
          wake_deadline_ = give_up;
          return plan;
        }
      }
      for (int64_t k = 0; k < batch && k < int64_t(waiting_.size()); ++k) batch_pending_.push_back(waiting_[size_t(k)]);
    }
    // Members are prefilled as the token budget allows, possibly over several steps.
    while (!batch_pending_.empty() && budget > 0) {
      Sequence* seq = batch_pending_.front();
      if (seq->status != SeqStatus::Waiting) {  // removed (cancelled) before it ran
        batch_pending_.pop_front();
        continue;
      }
      if (!admit(seq, budget, plan)) break;
      batch_pending_.pop_front();
    }
    return plan;
  }
  while (!waiting_.empty() && budget > 0 && int64_t(running_.size()) < options_.max_seqs) {
    if (!admit(waiting_.front(), budget, plan)) break;
  }
  return plan;
}

void Scheduler::on_computed(Sequence* seq, int64_t n_tokens) {
  seq->n_computed += n_tokens;
  const int64_t bs = blocks_.block_size();
  const int64_t n_full = seq->n_computed / bs;
  while (int64_t(seq->block_hashes.size()) < n_full) {
    const size_t i = seq->block_hashes.size();
    const BlockHash parent = i == 0 ? seq->prefix_seed : seq->block_hashes[i - 1];
    const auto block_tokens = std::span<const int32_t>(seq->tokens).subspan(i * size_t(bs), size_t(bs));
    seq->block_hashes.push_back(blocks_.register_full_block(seq->block_table[i], parent, block_tokens));
  }
}

}  // namespace tessera
