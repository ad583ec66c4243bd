// The per-step speculation decision on a synthetic cost curve (no model): a step costs the same up to 16 tokens
// (bound by reading the weights) and grows linearly after (compute-bound). Speculation is chosen where verifying
// is nearly free, turned off where the batch alone fills the compute, and the step cost follows observed steps.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/spec_policy.h"
#include "engine/step_cost.h"

namespace tessera {
namespace {

double roofline_seconds(int64_t n) { return std::max(1.0, double(n) / 16.0); }

class FreeProposer : public Proposer {
 public:
  void propose(std::span<DraftSlot>) override {}
  double estimate_seconds(int64_t, int64_t) const override { return seconds; }
  double seconds = 0.0;
};

SpeculativeOptions options(int64_t k, SpecSwitch s = SpecSwitch::CostModel) {
  SpeculativeOptions o;
  o.method = SpecMethod::Ngram;
  o.spec_tokens = k;
  o.switch_policy = s;
  return o;
}

TEST(StepCost, InterpolatesTheCalibrationAndFollowsObservedSteps) {
  StepCost c;
  c.calibrate([](int64_t n) { return roofline_seconds(n); }, 64);
  EXPECT_DOUBLE_EQ(c.seconds(1), 1.0);
  EXPECT_DOUBLE_EQ(c.seconds(16), 1.0);
  EXPECT_DOUBLE_EQ(c.seconds(48), 3.0);     // between the calibrated 32 and 64
  EXPECT_DOUBLE_EQ(c.seconds(128), 8.0);    // past the table: its last slope
  for (int i = 0; i < 200; ++i) c.observe(16, 2.0);  // the machine got twice as slow
  EXPECT_NEAR(c.seconds(16), 2.0, 0.01);
  EXPECT_NEAR(c.seconds(64), 8.0, 0.05);
}

TEST(SpecPolicy, SpeculatesAtSmallBatchesAndNotWhenTheBatchIsComputeBound) {
  FreeProposer proposer;
  SpecPolicy policy(options(4), proposer);
  policy.step_cost().calibrate([](int64_t n) { return roofline_seconds(n); }, 512);
  for (int i = 0; i < 50; ++i) policy.observe(4, 3);  // acceptance about 0.8
  EXPECT_GT(policy.acceptance(), 0.7);
  EXPECT_EQ(policy.choose_k(1, 1, 1), 4);      // batch 1: five tokens cost what one does
  EXPECT_GT(policy.choose_k(4, 4, 4), 0);      // batch 4: up to 16 tokens still free
  EXPECT_EQ(policy.choose_k(32, 32, 32), 0);   // batch 32: every extra token costs its share
  // 24 decoders of which 2 may speculate: past the knee, a guess row costs what a decode row does and gains
  // less (it is kept with probability 0.74, a decode row's token always).
  EXPECT_EQ(policy.choose_k(2, 24, 24), 0);
}

TEST(SpecPolicy, ACostlyProposerNeedsAcceptanceToPay) {
  FreeProposer proposer;
  proposer.seconds = 0.6;  // a draft model: 0.6 of a target step per proposal at batch 1
  SpecPolicy policy(options(4), proposer);
  policy.step_cost().calibrate([](int64_t n) { return roofline_seconds(n); }, 64);
  for (int i = 0; i < 100; ++i) policy.observe(4, 4);  // everything accepted
  EXPECT_GT(policy.choose_k(1, 1, 1), 0);
  for (int i = 0; i < 2000; ++i) policy.observe(4, 0);  // nothing accepted any more
  EXPECT_LT(policy.acceptance(), 0.2);
  EXPECT_EQ(policy.choose_k(1, 1, 1), 0);
}

TEST(SpecPolicy, ProbesAgainOnceTheMeasurementsFade) {
  FreeProposer proposer;
  proposer.seconds = 0.6;
  SpecPolicy policy(options(4), proposer);
  policy.step_cost().calibrate([](int64_t n) { return roofline_seconds(n); }, 64);
  EXPECT_GT(policy.choose_k(1, 1, 1), 0) << "nothing measured yet: a probe";
  for (int i = 0; i < 100; ++i) policy.observe(4, 0);
  EXPECT_EQ(policy.choose_k(1, 1, 1), 0);
  int steps = 0;
  while (policy.choose_k(1, 1, 1) == 0 && steps < 5000) ++steps;
  EXPECT_GT(steps, 100);
  EXPECT_LT(steps, 5000) << "never probed again";
}

TEST(SpecPolicy, AlwaysSpeculatesWithItsK) {
  FreeProposer proposer;
  SpecPolicy policy(options(3, SpecSwitch::Always), proposer);
  EXPECT_EQ(policy.choose_k(64, 64, 64), 3);
  EXPECT_EQ(policy.choose_k(0, 5, 5), 0);
}

}  // namespace
}  // namespace tessera
