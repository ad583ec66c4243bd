#include "bench/batching_bound.h"

#include <algorithm>
#include <chrono>
#include <deque>

#include "bench/model_bench.h"
#include "core/check.h"

namespace tessera {

double RooflineStepCost::step_seconds(int64_t n_tokens, int64_t n_logits) const {
  return std::max(floor_seconds, double(n_tokens) * seconds_per_token + double(n_logits) * seconds_per_logits_row);
}

RooflineStepCost roofline_step_cost(const Model& model, double bandwidth_gbs, double peak_gops) {
  const WeightMatrix& head = model.weights().output;
  RooflineStepCost cost;
  cost.floor_seconds = double(model.weight_bytes()) / (bandwidth_gbs * 1e9);
  cost.seconds_per_token = 2.0 * double(layer_matmul_elements(model)) / (peak_gops * 1e9);
  cost.seconds_per_logits_row = 2.0 * double(head.n_out) * double(head.n_in) / (peak_gops * 1e9);
  return cost;
}

PolicySchedule schedule_workload(SchedulingPolicy policy, const BatchingWorkload& w, const RooflineStepCost& cost) {
  TESSERA_CHECK(w.prompt_tokens > 0 && w.max_seqs > 0 && w.max_batched_tokens > 0);
  constexpr int64_t kBlockSize = 16;
  TESSERA_CHECK(w.n_ctx == 0 || w.n_ctx > w.prompt_tokens);
  auto max_len = [&](int out) {
    const int64_t len = int64_t(w.prompt_tokens) + out;
    return w.n_ctx > 0 ? std::min(len, w.n_ctx) : len;
  };
  // Only running sequences hold blocks (no prefix cache): max_seqs of the longest never run short.
  int64_t longest = 1;
  for (int out : w.output_tokens) {
    TESSERA_CHECK(out > 0);
    longest = std::max(longest, max_len(out));
  }
  const auto n_running = std::min<int64_t>(w.max_seqs, std::max<int64_t>(int64_t(w.output_tokens.size()), 1));
  BlockManager blocks(n_running * ((longest + kBlockSize - 1) / kBlockSize), kBlockSize, /*prefix_caching=*/false);
  SchedulerOptions options;
  options.policy = policy;
  options.max_seqs = w.max_seqs;
  options.max_batched_tokens = w.max_batched_tokens;
  options.batch_size = std::min<int64_t>(options.batch_size, w.max_seqs);
  Scheduler scheduler(blocks, options);

  using Clock = std::chrono::steady_clock;
  const Clock::time_point start{};
  auto clock_at = [&](double seconds) {
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  std::deque<Sequence> sequences;  // stable addresses for the scheduler
  for (size_t i = 0; i < w.output_tokens.size(); ++i) {
    Sequence& seq = sequences.emplace_back();
    seq.id = seq.arrival = i;
    seq.tokens.assign(size_t(w.prompt_tokens), 1);
    seq.n_prompt = w.prompt_tokens;
    seq.max_len = max_len(w.output_tokens[i]);
    scheduler.add(&seq, start);
  }

  PolicySchedule s;
  while (scheduler.n_waiting() + scheduler.n_running() > 0) {
    const StepPlan plan = scheduler.schedule(clock_at(s.seconds));
    if (plan.empty()) {  // Window waiting for its batch: time passes, no step
      TESSERA_CHECK(scheduler.wake_deadline() != Clock::time_point::max());
      s.seconds = std::chrono::duration<double>(scheduler.wake_deadline() - start).count();
      continue;
    }
    ++s.steps;
    s.seconds += cost.step_seconds(plan.n_tokens, plan.n_logits);
    for (const ScheduledChunk& chunk : plan.chunks) {
      Sequence* seq = chunk.seq;
      scheduler.on_computed(seq, chunk.n_tokens);
      if (!chunk.completes) continue;
      seq->tokens.push_back(1);  // the sampled token: its value does not change the schedule
      if (int64_t(seq->tokens.size()) >= seq->max_len) scheduler.remove(seq);
    }
  }
  return s;
}

}  // namespace tessera
