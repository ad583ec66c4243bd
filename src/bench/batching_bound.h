// What a batching workload allows on a machine: the steps that the static and continuous policies give
// `tessera bench --offline`'s workload, each costed by the roofline of the machine's measured limits. A step
// reads every weight once and multiplies its tokens, so it takes at least max(weight bytes / bandwidth,
// ops / peak). Kernels at 100 % of both limits would run each policy in that time: the ratio of the two times is
// the continuous/static figure such kernels would show here, and the ratio of the step counts the figure with
// compute free (one weight read per step). Not a bound on a measurement: kernels below the limits can measure
// above it, when their small-batch steps (memory-bound) run closer to their limit than their large ones.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "sched/scheduler.h"

namespace tessera {

struct BatchingWorkload {
  int prompt_tokens = 0;           // every request's prompt
  std::vector<int> output_tokens;  // per request, in arrival order (all arrive at once)
  int64_t max_seqs = 0;            // sequence slots (the static batch size)
  int64_t max_batched_tokens = 0;  // token budget of a step
  int64_t n_ctx = 0;               // a sequence ends at this many tokens, prompt included (0: no limit)
};

// The roofline of one step: floor_seconds is the weight read, and each token costs its multiply-adds at the
// peak (a token whose logits are computed also pays the output projection).
struct RooflineStepCost {
  double floor_seconds = 0;
  double seconds_per_token = 0;
  double seconds_per_logits_row = 0;
  double step_seconds(int64_t n_tokens, int64_t n_logits) const;
};

// A model's step at these limits: its weight bytes at `bandwidth_gbs`, its layer and output-head multiply-adds
// at `peak_gops` (int8 or fp32, whichever its kernels compute in).
RooflineStepCost roofline_step_cost(const Model& model, double bandwidth_gbs, double peak_gops);

struct PolicySchedule {
  int64_t steps = 0;     // forward passes, each one read of the weights
  double seconds = 0;    // the steps under the roofline cost
};

// The steps the real Scheduler plans for the workload under `policy` (all requests arrive at once, the KV pool
// holds every running sequence whole, so nothing is preempted): a completing chunk yields one output token, and a
// request leaves once it has all of them. The clock is the roofline cost of the steps so far (Window's wait
// for a batch to fill passes on it without a step).
PolicySchedule schedule_workload(SchedulingPolicy policy, const BatchingWorkload& workload,
                                 const RooflineStepCost& cost);

}  // namespace tessera
