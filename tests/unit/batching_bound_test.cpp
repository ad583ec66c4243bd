// The batching bound: the real scheduler's step schedule for an offline workload, costed by a roofline step.
// Small workloads whose schedules can be counted by hand.
#include <gtest/gtest.h>

#include "bench/batching_bound.h"

namespace tessera {
namespace {

constexpr RooflineStepCost kOneSecondPerStep{.floor_seconds = 1.0};

TEST(BatchingBound, StaticWaitsForItsLongestMemberContinuousRefillsTheSlot) {
  // Two slots, prompts of 2 tokens, outputs of 1, 5 and 1 tokens.
  const BatchingWorkload w{.prompt_tokens = 2, .output_tokens = {1, 5, 1}, .max_seqs = 2, .max_batched_tokens = 64};
  // Static: step 1 prefills the first two (the first ends with its one token), steps 2-5 decode the second's
  // other 4, step 6 is the next batch: the third request's prefill.
  const PolicySchedule st = schedule_workload(SchedulingPolicy::Static, w, kOneSecondPerStep);
  EXPECT_EQ(st.steps, 6);
  EXPECT_DOUBLE_EQ(st.seconds, 6.0);
  // Continuous: the third request takes the freed slot in step 2, beside the second's decode.
  const PolicySchedule ct = schedule_workload(SchedulingPolicy::Continuous, w, kOneSecondPerStep);
  EXPECT_EQ(ct.steps, 5);
  EXPECT_DOUBLE_EQ(ct.seconds, 5.0);
}

TEST(BatchingBound, PromptsAreChunkedByTheTokenBudget) {
  // A 10-token prompt with a budget of 4: chunks of 4, 4 and 2; the last samples the only output token.
  const BatchingWorkload w{.prompt_tokens = 10, .output_tokens = {1}, .max_seqs = 4, .max_batched_tokens = 4};
  const RooflineStepCost per_token{.floor_seconds = 0.0, .seconds_per_token = 1.0, .seconds_per_logits_row = 100.0};
  for (SchedulingPolicy p : {SchedulingPolicy::Static, SchedulingPolicy::Continuous}) {
    const PolicySchedule s = schedule_workload(p, w, per_token);
    EXPECT_EQ(s.steps, 3) << scheduling_policy_name(p);
    EXPECT_DOUBLE_EQ(s.seconds, 10.0 + 100.0) << scheduling_policy_name(p);
  }
}

TEST(BatchingBound, SequencesEndAtTheContext) {
  // A context of 6 holds a 2-token prompt and 4 outputs: the request that asks for 9 ends after 4, as the
  // engine ends it (Length).
  const BatchingWorkload w{
      .prompt_tokens = 2, .output_tokens = {9}, .max_seqs = 1, .max_batched_tokens = 64, .n_ctx = 6};
  EXPECT_EQ(schedule_workload(SchedulingPolicy::Continuous, w, kOneSecondPerStep).steps, 4);
}

TEST(BatchingBound, AStepCostsTheLargerOfTheWeightReadAndItsTokens) {
  const RooflineStepCost c{.floor_seconds = 0.025, .seconds_per_token = 0.001, .seconds_per_logits_row = 0.0005};
  EXPECT_DOUBLE_EQ(c.step_seconds(1, 1), 0.025);
  EXPECT_DOUBLE_EQ(c.step_seconds(16, 16), 0.025);
  EXPECT_DOUBLE_EQ(c.step_seconds(143, 16), 0.143 + 0.008);
}

TEST(BatchingBound, WindowWaitsOnTheModelledClock) {
  // A window of 2 with one request: it waits max_wait_ms (10) for a partner that never comes, then runs alone.
  const BatchingWorkload one{.prompt_tokens = 2, .output_tokens = {1}, .max_seqs = 2, .max_batched_tokens = 64};
  const PolicySchedule s = schedule_workload(SchedulingPolicy::Window, one, kOneSecondPerStep);
  EXPECT_EQ(s.steps, 1);
  EXPECT_NEAR(s.seconds, 1.010, 1e-6);
  // With three, the third has waited since the start when the first batch ends: no further wait.
  const BatchingWorkload three{.prompt_tokens = 2, .output_tokens = {1, 1, 1}, .max_seqs = 2, .max_batched_tokens = 64};
  const PolicySchedule t = schedule_workload(SchedulingPolicy::Window, three, kOneSecondPerStep);
  EXPECT_EQ(t.steps, 2);
  EXPECT_DOUBLE_EQ(t.seconds, 2.0);
}

}  // namespace
}  // namespace tessera
