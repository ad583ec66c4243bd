// Decides, each step, which tokens of which sequences run: iteration-level (continuous) batching under a token
// budget and a sequence limit, with priorities, prefix-cache reuse, chunked prefill and preemption; or the
// static / time-window batching policies for comparison. Knows nothing of kernels: testable with a fake
// executor.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <vector>

#include "kv/block_manager.h"
#include "sched/sequence.h"

namespace tessera {

enum class SchedulingPolicy {
  Continuous,  // iteration-level: sequences join and leave every step
  Static,      // a batch of max_seqs requests runs to completion before new requests start
  Window,      // collect requests for up to max_wait_ms or until batch_size wait, then run them together
};
const char* scheduling_policy_name(SchedulingPolicy policy);  // "continuous", "static", "window"

// The scheduler's options, and the engine's: EngineOptions holds one of these, not copies of its fields.
struct SchedulerOptions {
  int64_t max_batched_tokens = 512;  // tokens per step
  int64_t max_seqs = 64;             // sequences per step; also the Static policy's batch
  SchedulingPolicy policy = SchedulingPolicy::Continuous;
  int64_t batch_size = 8;            // Window: sequences per batch (at most max_seqs)
  int64_t max_wait_ms = 10;          // Window: longest wait to fill a batch
};

// One sequence's share of a step, fixed when the step is planned: nothing here is re-derived from the sequence
// after the forward pass has moved its n_computed on.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t first = 0;       // compute positions [first, first + n_tokens): seq->n_computed when planned
  int64_t n_tokens = 0;
  // The chunk ends at the sequence's last known token: its last logits row is the one to sample from.
  bool completes = false;
  // Logits rows the chunk returns, for its last n_logits tokens: 1 when it completes the sequence, every token
  // with Sequence::all_logits, else 0. They start at row `logits_row` of the step's logits.
  int64_t n_logits = 0;
  int64_t logits_row = 0;
  // Speculative verification: the chunk's last n_draft tokens are the sequence's draft (Sequence::draft), after
  // its one uncomputed token; every token of the chunk returns logits (n_logits = 1 + n_draft), row i being the
  // target's distribution for the token after chunk position i.
  int64_t n_draft = 0;
  bool wants_logits() const { return completes; }
};

struct BlockCopy {
  int32_t from = -1, to = -1;
  int64_t n_positions = 0;  // leading positions to copy
};

struct StepPlan {
  std::vector<BlockCopy> copies;     // copy-on-write: run before the forward pass
  std::vector<ScheduledChunk> chunks;
  std::vector<Sequence*> preempted;  // sent back to waiting this step (their blocks are freed)
  int64_t n_tokens = 0;
  int64_t n_logits = 0;              // rows of logits the step returns: the sum of the chunks' n_logits
  int64_t n_draft = 0;               // draft tokens verified this step: the sum of the chunks' n_draft
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(BlockManager& blocks, SchedulerOptions options);

  void add(Sequence* seq, std::chrono::steady_clock::time_point now);
  // Adds a sequence that already holds computed tokens and (shared) blocks straight to the running set: the
  // forks of a request with n > 1 samples. Writing into a shared partial block triggers a copy (StepPlan::copies).
  void add_running(Sequence* seq);
  // Removes a sequence wherever it is and frees its blocks (finished, cancelled, expired).
  void remove(Sequence* seq);
  StepPlan schedule(std::chrono::steady_clock::time_point now);
  // After the executor ran a chunk: marks its tokens computed and registers newly full blocks for reuse.
  // A verification chunk counts its first token and the accepted draft tokens only.
  void on_computed(Sequence* seq, int64_t n_tokens);
  // Releases the blocks past those the sequence's tokens need: after a verification, the blocks that held
  // only rejected draft positions (never registered as prefixes, so they go straight back to the free list).
  void trim_blocks(Sequence* seq);

  size_t n_waiting() const { return waiting_.size(); }
  size_t n_running() const { return running_.size(); }
  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  // When Window mode waits for a batch to fill, the time it will give up waiting; else time_point::max().
  std::chrono::steady_clock::time_point wake_deadline() const { return wake_deadline_; }
  // Blocks a sequence of `n_tokens` tokens needs.
  int64_t blocks_for(int64_t n_tokens) const { return (n_tokens + blocks_.block_size() - 1) / blocks_.block_size(); }

 private:
  // Makes the sequence own blocks for positions [0, n_positions); false when the pool is out of blocks.
  bool grow_blocks(Sequence* seq, int64_t n_positions, StepPlan& plan);
  void free_blocks(Sequence* seq);
  void preempt(Sequence* seq, StepPlan& plan);
  bool admit(Sequence* seq, int64_t& budget, StepPlan& plan);
  // Appends seq's next n tokens to the plan, with the logits rows they return (the last n_draft from its draft).
  void add_chunk(StepPlan& plan, Sequence* seq, int64_t n, int64_t n_draft = 0);
  // How many of a decoding sequence's draft tokens fit this step: the token budget after its own token, the
  // room left before max_len, the n_after running sequences still to be given their own token, and the blocks
  // for them (when they do not fit, the draft is dropped rather than preempting anyone for it).
  int64_t draft_that_fits(Sequence* seq, int64_t budget, int64_t n_after, StepPlan& plan);
  void insert_waiting(Sequence* seq);
  Sequence* lowest_running() const;  // lowest priority, most recently admitted

  BlockManager& blocks_;
  SchedulerOptions options_;
  std::deque<Sequence*> waiting_;   // sorted by (priority, arrival)
  std::vector<Sequence*> running_;  // sorted by (priority, admitted)
  std::deque<Sequence*> batch_pending_;  // Static/Window: members of the current batch not yet admitted
  uint64_t admit_counter_ = 0;
  std::chrono::steady_clock::time_point wake_deadline_ = std::chrono::steady_clock::time_point::max();
};

}  // namespace tessera
