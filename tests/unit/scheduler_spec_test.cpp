// The scheduler's verification chunks (speculative decoding), with no model: a decoding sequence's draft runs
// after its last token in one chunk with a logits row per token, within the token budget, the room before
// max_len and the free blocks (never preempting anyone for a guess); rejected positions' blocks go back.
#include <gtest/gtest.h>

#include "sched/scheduler.h"
#include "scheduler_test_util.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
using tessera::testing::make_seq;

// Admits `s` and runs one step of the fake executor: every chunk computed, every completing one sampling a
// token (7). `s`, its prompt computed, is decoding from here.
void prefill(Scheduler& sched, Sequence& s) {
  const auto now = Clock::now();
  sched.add(&s, now);
  const StepPlan p = sched.schedule(now);
  for (const auto& c : p.chunks) {
    sched.on_computed(c.seq, c.n_tokens);
    if (c.completes) c.seq->tokens.push_back(7);
  }
}

TEST(SchedulerSpec, ADraftRunsAfterTheLastTokenWithARowPerToken) {
  BlockManager bm(16, 4, false);
  Scheduler sched(bm, {.max_batched_tokens = 64, .max_seqs = 4});
  Sequence a = make_seq(1, 6, 20);
  prefill(sched, a);
  ASSERT_TRUE(a.decoding());
  EXPECT_EQ(a.block_table, (std::vector<int32_t>{0, 1}));
  a.draft = {8, 9, 10};
  const StepPlan p = sched.schedule(Clock::now());
  ASSERT_EQ(p.chunks.size(), 1u);
  const ScheduledChunk& c = p.chunks[0];
  EXPECT_EQ(c.first, 6);
  EXPECT_EQ(c.n_tokens, 4);
  EXPECT_EQ(c.n_draft, 3);
  EXPECT_EQ(c.n_logits, 4);
  EXPECT_TRUE(c.completes);
  EXPECT_EQ(p.n_draft, 3);
  // Positions 6..9: the draft reaches into a third block.
  EXPECT_EQ(a.block_table, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(a.token_at(6), 7);
  EXPECT_EQ(a.token_at(9), 10);
  // One guess accepted: positions 6 and 7 computed and one more token sampled (position 8, in block 2, so it
  // stays). A fully rejected run gives such a block back (b below).
  sched.on_computed(&a, 2);
  a.tokens.insert(a.tokens.end(), {8, 11});
  a.draft.clear();
  sched.trim_blocks(&a);
  EXPECT_EQ(a.block_table, (std::vector<int32_t>{0, 1, 2}));
  Sequence b = make_seq(2, 3, 20);
  prefill(sched, b);  // b: 3 prompt tokens computed, a fourth sampled; block 3 (a decoded a token meanwhile)
  EXPECT_EQ(b.block_table, (std::vector<int32_t>{3}));
  b.draft = {1, 2, 3, 4, 5};  // positions 3..8: blocks for 9 positions
  const StepPlan q = sched.schedule(Clock::now());
  EXPECT_EQ(b.block_table.size(), 3u);
  ASSERT_EQ(q.chunks.size(), 2u);
  EXPECT_EQ(q.chunks[1].n_draft, 5);
  sched.on_computed(&b, 1);  // everything rejected: only the old last token is computed
  b.tokens.push_back(9);
  b.draft.clear();
  sched.trim_blocks(&b);
  EXPECT_EQ(b.block_table, (std::vector<int32_t>{3, 4}));  // positions 0..4 need two blocks; the third is free
  EXPECT_EQ(bm.ref_count(5), 0);
}

TEST(SchedulerSpec, DraftsYieldToTheBudgetTheOthersNeedAndToMaxLen) {
  BlockManager bm(32, 4, false);
  Scheduler sched(bm, {.max_batched_tokens = 6, .max_seqs = 4});
  Sequence a = make_seq(1, 4, 4);
  Sequence b = make_seq(2, 4, 20);
  prefill(sched, a);
  prefill(sched, b);
  a.draft = {1, 2, 3, 4, 5, 6, 7, 8};
  b.draft = {1, 2, 3, 4, 5, 6, 7, 8};
  const StepPlan p = sched.schedule(Clock::now());
  ASSERT_EQ(p.chunks.size(), 2u);
  // a: 6 tokens with max_len 8: its token and one guess (the last slot is the bonus token's).
  EXPECT_EQ(p.chunks[0].seq, &a);
  EXPECT_EQ(p.chunks[0].n_draft, 1);
  // b: what the budget of 6 leaves after a's 2 tokens.
  EXPECT_EQ(p.chunks[1].seq, &b);
  EXPECT_EQ(p.chunks[1].n_tokens, 4);
  EXPECT_EQ(p.chunks[1].n_draft, 3);
  EXPECT_EQ(p.n_tokens, 6);
}

TEST(SchedulerSpec, ADraftNeverPreemptsAnyone) {
  BlockManager bm(3, 4, false);
  Scheduler sched(bm, {.max_batched_tokens = 64, .max_seqs = 4});
  Sequence a = make_seq(1, 4, 20);
  Sequence b = make_seq(2, 3, 20);
  prefill(sched, a);
  prefill(sched, b);  // a [0, 1], b [2]: the pool is full
  // a's guesses would need a third block: none is free, and taking b's is not worth a guess.
  a.draft = {1, 2, 3, 4, 5, 6};
  const StepPlan p = sched.schedule(Clock::now());
  EXPECT_TRUE(p.preempted.empty());
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].n_draft, 0);
  EXPECT_EQ(p.chunks[0].n_tokens, 1);
  EXPECT_TRUE(a.draft.empty());
}

}  // namespace
}  // namespace tessera
