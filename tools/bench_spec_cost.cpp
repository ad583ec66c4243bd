// Verification cost ratios: measured, tabulated, as JSON.
#include "bench_spec_cost.h"

#include <cstdio>

#include <fmt/format.h>

namespace tessera {
namespace {

constexpr int64_t kBatches[] = {1, 8};
const std::vector<int64_t> kDraftTokens = {1, 2, 4, 8};
constexpr int64_t kContext = 128;  // positions before the verified ones: a short chat turn

}  // namespace

SpecCostReport measure_spec_cost(std::shared_ptr<const Model> model, ThreadPool& pool, KvType kv_type, bool quick) {
  SpecCostReport r;
  for (int64_t b : kBatches) {
    std::fprintf(stderr, "bench: verification cost at batch %lld\n", static_cast<long long>(b));
    r.by_batch.emplace_back(b, measure_verify_cost(model, pool, b, kDraftTokens, kContext, quick ? 3 : 9, kv_type));
  }
  return r;
}

nlohmann::ordered_json SpecCostReport::json() const {
  nlohmann::ordered_json j;
  for (const auto& [b, c] : by_batch) {
    auto& e = j[std::to_string(b)];
    e["decode_step_seconds"] = c.decode_step_seconds;
    for (size_t i = 0; i < c.verify_step_seconds.size(); ++i)
      e["verify_ratio"][std::to_string(c.verify_step_seconds[i].first)] = c.ratio(i);
  }
  return j;
}

void SpecCostReport::print() const {
  std::printf("%-34s", "verification step / decode step");
  if (!by_batch.empty())
    for (const auto& [k, s] : by_batch.front().second.verify_step_seconds) std::printf(" %7s", fmt::format("k={}", k).c_str());
  std::printf("   (k draft tokens + 1 per sequence, median of interleaved steps)\n");
  for (const auto& [b, c] : by_batch) {
    std::printf("%-34s", fmt::format("  batch {} (decode step {:.2f} ms)", b, c.decode_step_seconds * 1e3).c_str());
    for (size_t i = 0; i < c.verify_step_seconds.size(); ++i) std::printf(" %6.2fx", c.ratio(i));
    std::printf("\n");
  }
}

}  // namespace tessera
