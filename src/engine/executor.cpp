// Plan → forward batch → logits.
#include "engine/executor.h"

#include "core/check.h"

namespace tessera {

Executor::Executor(std::shared_ptr<const Model> model, KvPool& kv, ThreadPool& pool)
    : kv_(kv), forward_(std::move(model), kv, pool) {}

std::span<const float> Executor::execute(const StepPlan& plan) {
  for (const BlockCopy& copy : plan.copies) kv_.copy_block(copy.from, copy.to, copy.n_positions);
  batch_.clear();
  for (const ScheduledChunk& chunk : plan.chunks) {
    const Sequence& seq = *chunk.seq;
    const int32_t s = batch_.add_sequence(seq.block_table);
    const int64_t end = chunk.first + chunk.n_tokens;
    const int64_t first_with_logits = end - chunk.n_logits;
    for (int64_t i = chunk.first; i < end; ++i) {
      batch_.add_token(seq.token_at(i), int32_t(i), s, i >= first_with_logits);
    }
  }
  const std::span<const float> logits = forward_.run(batch_);
  TESSERA_DCHECK(logits.size() == size_t(plan.n_logits) * size_t(forward_.model().config().n_vocab));
  return logits;
}

}  // namespace tessera
