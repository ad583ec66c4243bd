// The executor: runs one step's plan on the model (the plan's copy-on-write block copies, then one forward pass
// over its flat batch) and returns the logits rows the plan asked for. Decides nothing: which sequences, which
// tokens and which rows want logits were all fixed by the scheduler when it made the plan.
#pragma once

#include <memory>
#include <span>

#include "core/thread_pool.h"
#include "kv/kv_pool.h"
#include "model/forward.h"
#include "sched/scheduler.h"

namespace tessera {

class Executor {
 public:
  Executor(std::shared_ptr<const Model> model, KvPool& kv, ThreadPool& pool);

  // Returns logits [plan.n_logits, n_vocab]: chunk c's rows start at c.logits_row. Valid until the next call.
  // Throws when the forward pass fails (nothing of the step is usable then).
  std::span<const float> execute(const StepPlan& plan);

  // Tokens in the last executed batch.
  int64_t n_batch_tokens() const { return batch_.size(); }

 private:
  KvPool& kv_;
  Forward forward_;
  ForwardBatch batch_;  // reused: no allocation per step once warm
};

}  // namespace tessera
