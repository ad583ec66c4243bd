// The speculative-verification part of `tessera bench`: one step verifying k = 1, 2, 4, 8 draft tokens per
// sequence divided by one ordinary decode step of the same run, at batch 1 and 8. This bounds what speculation
// can gain for any acceptance rate (a step of k accepted tokens costs ratio(k) decode steps).
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "bench/model_bench.h"
#include "core/kv_type.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace tessera {

struct SpecCostReport {
  std::vector<std::pair<int64_t, VerifyCost>> by_batch;  // (batch, cost)
  nlohmann::ordered_json json() const;
  void print() const;
};

SpecCostReport measure_spec_cost(std::shared_ptr<const Model> model, ThreadPool& pool, KvType kv_type, bool quick);

}  // namespace tessera
