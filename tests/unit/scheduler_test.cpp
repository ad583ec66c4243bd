// Scheduler with a fake executor (no model): chunked prefill under the token budget, sequence limits,
// preemption order, priorities, prefix reuse and the batch policies, asserting exact plans and block ids.
#include <gtest/gtest.h>

#include <numeric>

#include "sched/scheduler.h"
#include "scheduler_test_util.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
using tessera::testing::make_seq;

// The fake executor: marks chunks computed and appends a token to sequences that produced logits.
void execute(Scheduler& sched, const StepPlan& plan) {
  for (const auto& c : plan.chunks) {
    const bool logits = c.wants_logits();
    sched.on_computed(c.seq, c.n_tokens);
    if (logits) c.seq->tokens.push_back(7);
  }
}

TEST(Scheduler, ChunkedPrefillUnderTheTokenBudgetThenDecode) {
  BlockManager bm(16, 4, true);
  Scheduler sched(bm, {.max_batched_tokens = 6, .max_seqs = 4});
  Sequence a = make_seq(1, 10, 5);
  const auto now = Clock::now();
  sched.add(&a, now);
  StepPlan p1 = sched.schedule(now);
  ASSERT_EQ(p1.chunks.size(), 1u);
  EXPECT_EQ(p1.chunks[0].n_tokens, 6);
  EXPECT_FALSE(p1.chunks[0].wants_logits());
  EXPECT_EQ(a.block_table, (std::vector<int32_t>{0, 1}));
  execute(sched, p1);
  StepPlan p2 = sched.schedule(now);
  ASSERT_EQ(p2.chunks.size(), 1u);
  EXPECT_EQ(p2.chunks[0].n_tokens, 4);
  EXPECT_TRUE(p2.chunks[0].wants_logits());
  EXPECT_EQ(a.block_table, (std::vector<int32_t>{0, 1, 2}));
  execute(sched, p2);
  StepPlan p3 = sched.schedule(now);
  EXPECT_EQ(p3.chunks[0].n_tokens, 1);  // decode
  sched.remove(&a);
  EXPECT_EQ(bm.n_free(), 16);
}

TEST(Scheduler, DecodesComeFirstAndNewRequestsFillTheBudget) {
  BlockManager bm(32, 4, true);
  Scheduler sched(bm, {.max_batched_tokens = 8, .max_seqs = 4});
  Sequence a = make_seq(1, 3, 10), b = make_seq(2, 20, 10, 0, 2000);
  const auto now = Clock::now();
  sched.add(&a, now);
  execute(sched, sched.schedule(now));  // a prefilled, one token sampled
  sched.add(&b, now);
  StepPlan p = sched.schedule(now);
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].seq, &a);
  EXPECT_EQ(p.chunks[0].n_tokens, 1);
  EXPECT_EQ(p.chunks[1].seq, &b);
  EXPECT_EQ(p.chunks[1].n_tokens, 7);
}

TEST(Scheduler, OutOfBlocksPreemptsTheLowestPriorityMostRecentlyAdmitted) {
  BlockManager bm(4, 4, false);  // 16 positions
  Scheduler sched(bm, {.max_batched_tokens = 64, .max_seqs = 4});
  Sequence a = make_seq(1, 4, 20, 0), b = make_seq(2, 4, 20, 0, 2000), c = make_seq(3, 4, 20, 0, 3000);
  const auto now = Clock::now();
  sched.add(&a, now);
  sched.add(&b, now);
  sched.add(&c, now);
  execute(sched, sched.schedule(now));  // each holds one full block, and needs a second for its next token
  EXPECT_EQ(bm.n_free(), 1);
  StepPlan p = sched.schedule(now);
  // a gets the last free block; b needs one: c (most recently admitted) is preempted and b takes its block.
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], &c);
  EXPECT_EQ(c.status, SeqStatus::Waiting);
  EXPECT_EQ(c.n_computed, 0);
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].seq, &a);
  EXPECT_EQ(p.chunks[1].seq, &b);
  EXPECT_EQ(sched.n_waiting(), 1u);
}

TEST(Scheduler, HigherPriorityTakesTheLastSlot) {
  BlockManager bm(16, 4, true);
  Scheduler sched(bm, {.max_batched_tokens = 64, .max_seqs = 1});
  Sequence low = make_seq(1, 4, 20, 5), high = make_seq(2, 4, 20, 0, 2000);
  const auto now = Clock::now();
  sched.add(&low, now);
  execute(sched, sched.schedule(now));
  sched.add(&high, now);
  StepPlan p = sched.schedule(now);
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], &low);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, &high);
  // The preempted request is first in line once the slot frees (it keeps its place in its class).
  execute(sched, p);
  sched.remove(&high);
  StepPlan p2 = sched.schedule(now);
  ASSERT_EQ(p2.chunks.size(), 1u);
  EXPECT_EQ(p2.chunks[0].seq, &low);
  EXPECT_EQ(p2.chunks[0].n_tokens, 1) << "the prompt's full block came back from the prefix cache";
}

TEST(Scheduler, PrefixReuseStartsAtTheCachedBlocks) {
  BlockManager bm(16, 4, true);
  Scheduler sched(bm, {.max_batched_tokens = 64, .max_seqs = 4});
  Sequence a = make_seq(1, 9, 1);
  const auto now = Clock::now();
  sched.add(&a, now);
  execute(sched, sched.schedule(now));
  const auto a_blocks = a.block_table;
  sched.remove(&a);
  Sequence b = make_seq(2, 11, 1);  // same first 9 tokens, then two more
  sched.add(&b, now);
  StepPlan p = sched.schedule(now);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(b.block_table[0], a_blocks[0]);
  EXPECT_EQ(b.block_table[1], a_blocks[1]);
  EXPECT_EQ(p.chunks[0].n_tokens, 3);  // 8 tokens from the cache
  EXPECT_EQ(b.n_cached_prompt_tokens, 8);
}

TEST(Scheduler, ForkedSequencesShareBlocksAndCopyOnWrite) {
  BlockManager bm(16, 4, true);
  Scheduler sched(bm, {.max_batched_tokens = 64, .max_seqs = 4});
  Sequence a = make_seq(1, 6, 10);  // blocks: one full (4 tokens), one partial (2 of 4)
  const auto now = Clock::now();
  sched.add(&a, now);
  execute(sched, sched.schedule(now));
  ASSERT_EQ(a.block_table, (std::vector<int32_t>{0, 1}));
  // Fork b from a after the prompt: same tokens (a's sampled token replaced by b's own), shared blocks.
  Sequence b = a;
  b.id = 2;
  b.tokens.back() = 8;
  for (int32_t block : b.block_table) bm.share(block);
  sched.add_running(&b);
  EXPECT_EQ(bm.ref_count(1), 2);
  StepPlan p = sched.schedule(now);
  // Both write position 6, inside shared block 1: the first to run copies it, the second then owns block 1.
  ASSERT_EQ(p.copies.size(), 1u);
  EXPECT_EQ(p.copies[0].from, 1);
  EXPECT_EQ(p.copies[0].to, 2);
  EXPECT_EQ(p.copies[0].n_positions, 2);
  EXPECT_EQ(a.block_table, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(b.block_table, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(bm.ref_count(0), 2);  // the full prompt block stays shared
  EXPECT_EQ(bm.ref_count(1), 1);
  sched.remove(&a);
  sched.remove(&b);
  EXPECT_EQ(bm.n_free(), 16);
}

TEST(Scheduler, StaticBatchRunsToCompletionBeforeNewRequests) {
  BlockManager bm(32, 4, true);
  Scheduler sched(bm, {.max_batched_tokens = 64, .max_seqs = 2, .policy = SchedulingPolicy::Static, .batch_size = 2});
  Sequence a = make_seq(1, 4, 2), b = make_seq(2, 4, 2, 0, 2000), c = make_seq(3, 4, 2, 0, 3000);
  const auto now = Clock::now();
  sched.add(&a, now);
  sched.add(&b, now);
  execute(sched, sched.schedule(now));
  sched.add(&c, now);
  StepPlan p = sched.schedule(now);
  EXPECT_EQ(p.chunks.size(), 2u);  // a and b decode; c waits
  sched.remove(&a);
  execute(sched, p);
  p = sched.schedule(now);
  EXPECT_EQ(p.chunks.size(), 1u) << "c must not join a running static batch";
  sched.remove(&b);
  p = sched.schedule(now);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, &c);
}

TEST(Scheduler, WindowWaitsForABatchOrTheDeadline) {
  BlockManager bm(32, 4, true);
  Scheduler sched(bm, {.max_batched_tokens = 64, .max_seqs = 8, .policy = SchedulingPolicy::Window, .batch_size = 3,
                       .max_wait_ms = 50});
  Sequence a = make_seq(1, 4, 2), b = make_seq(2, 4, 2, 0, 2000), c = make_seq(3, 4, 2, 0, 3000);
  const auto t0 = Clock::now();
  sched.add(&a, t0);
  EXPECT_TRUE(sched.schedule(t0).empty());
  EXPECT_EQ(sched.wake_deadline(), t0 + std::chrono::milliseconds(50));
  sched.add(&b, t0);
  EXPECT_TRUE(sched.schedule(t0 + std::chrono::milliseconds(10)).empty());
  EXPECT_EQ(sched.schedule(t0 + std::chrono::milliseconds(60)).chunks.size(), 2u);  // window closed
  sched.remove(&a);
  sched.remove(&b);
  Sequence d = make_seq(4, 4, 2, 0, 4000), e = make_seq(5, 4, 2, 0, 5000);
  const auto t1 = t0 + std::chrono::milliseconds(100);
  sched.add(&c, t1);
  sched.add(&d, t1);
  sched.add(&e, t1);
  EXPECT_EQ(sched.schedule(t1).chunks.size(), 3u);  // full batch: no wait
}

}  // namespace
}  // namespace tessera
