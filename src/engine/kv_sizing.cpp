// Pool and context sizes from the model's shape and the memory available.
#include "engine/kv_sizing.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "engine/engine.h"
#include "kv/kv_pool.h"
#include "model/memory_fit.h"
#include "model/model.h"

namespace tessera {
namespace {

constexpr double kGiB = double(uint64_t{1} << 30);

}  // namespace

uint64_t kv_block_bytes(const ModelConfig& c, int64_t block_size, KvType kv_type) {
  return KvPool::block_bytes(c.n_layer, c.n_head_kv, c.head_dim, std::max<int64_t>(block_size, 1), kv_type);
}

int64_t kv_blocks_for_context(int64_t n_positions, int64_t block_size) {
  return (n_positions + block_size - 1) / block_size;
}

uint64_t kv_cache_bytes_for_context(const ModelConfig& c, int64_t n_ctx, KvType kv_type, int64_t block_size) {
  return uint64_t(kv_blocks_for_context(n_ctx, block_size)) * kv_block_bytes(c, block_size, kv_type);
}

int64_t context_that_fits(const ModelConfig& c, uint64_t budget_bytes, KvType kv_type, int64_t block_size) {
  const int64_t positions = int64_t(budget_bytes / kv_block_bytes(c, block_size, kv_type)) * block_size;
  return positions >= kContextGranule ? positions / kContextGranule * kContextGranule : positions;
}

uint64_t kv_cache_budget_bytes(const Model& model, uint64_t available_bytes) {
  if (available_bytes == 0) return std::numeric_limits<uint64_t>::max();
  const uint64_t reserve = std::max<uint64_t>(available_bytes / 16, uint64_t{256} << 20);
  const uint64_t taken = model.weight_bytes() + reserve;
  return available_bytes > taken ? available_bytes - taken : 0;
}

uint64_t engine_kv_block_bytes(const ModelConfig& c, const EngineOptions& options) {
  return kv_block_bytes(c, options.kv_block_size, options.kv_type);
}

int64_t engine_kv_blocks(const ModelConfig& c, const EngineOptions& options) {
  if (options.kv_blocks > 0) return options.kv_blocks;
  const uint64_t bytes_per_block = engine_kv_block_bytes(c, options);
  uint64_t bytes = options.kv_cache_bytes;
  if (bytes == 0) {
    const int64_t block_size = std::max<int64_t>(options.kv_block_size, 1);
    const uint64_t want = uint64_t(std::max<int64_t>(options.scheduling.max_seqs, 0)) *
                          uint64_t(usable_context(c, options.n_ctx)) / uint64_t(block_size) * bytes_per_block;
    bytes = std::min<uint64_t>(want, kDefaultKvCacheCapBytes);
  }
  return int64_t(bytes / bytes_per_block);
}

uint64_t fit_kv_pool(const Model& model, EngineOptions& options, uint64_t available_bytes,
                     const std::string& size_source, std::string* note, const std::string& context_source) {
  const ModelConfig& c = model.config();
  const uint64_t block_bytes = engine_kv_block_bytes(c, options);
  const uint64_t planned = uint64_t(engine_kv_blocks(c, options)) * block_bytes;
  if (available_bytes == 0) return planned;
  if (options.kv_blocks > 0 || options.kv_cache_bytes > 0) {
    require_kv_cache_fits_in_memory(model, planned, available_bytes,
                                    !size_source.empty()    ? size_source
                                    : options.kv_blocks > 0 ? fmt::format("kv_blocks {}", options.kv_blocks)
                                                            : fmt::format("kv_cache_bytes {}", options.kv_cache_bytes));
    return planned;
  }
  const uint64_t budget = kv_cache_budget_bytes(model, available_bytes);
  if (planned <= budget) return planned;
  // Less than one full-length sequence fits: say so now rather than reject every long request later.
  const int64_t n_ctx = usable_context(c, options.n_ctx);
  const uint64_t one_sequence = kv_cache_bytes_for_context(c, n_ctx, options.kv_type, options.kv_block_size);
  if (budget < one_sequence) {
    require_kv_cache_fits_in_memory(
        model, one_sequence, available_bytes,
        (context_source.empty() ? fmt::format("n_ctx {}", n_ctx) : context_source) + " (one sequence)");
  }
  // One full-length sequence is the floor, taken from the reserve when it must: a smaller pool would refuse
  // long requests one by one (and a budget of 0 would read as "derive the default" and allocate it all).
  options.kv_cache_bytes = std::max(budget, one_sequence);
  const uint64_t bytes = uint64_t(engine_kv_blocks(c, options)) * block_bytes;
  if (note) {
    *note = fmt::format("KV cache limited to {:.2f} GiB ({} positions) by the memory left after the weights",
                        double(bytes) / kGiB, bytes / block_bytes * uint64_t(options.kv_block_size));
  }
  return bytes;
}

std::vector<KvPoolFit> fit_kv_pools(const std::vector<KvPoolRequest>& engines, uint64_t available_bytes) {
  uint64_t all_weights = 0;
  for (const KvPoolRequest& e : engines) all_weights += e.model->weight_bytes();
  std::vector<KvPoolFit> fits;
  uint64_t pools_before = 0;
  for (const KvPoolRequest& e : engines) {
    const uint64_t others = all_weights - e.model->weight_bytes() + pools_before;
    // 0 means "no check", so memory the others already take leaves 1 byte, which every check then refuses.
    const uint64_t left = available_bytes == 0 ? 0 : available_bytes > others ? available_bytes - others : 1;
    KvPoolFit fit;
    fit.bytes = fit_kv_pool(*e.model, *e.options, left, e.size_source, &fit.note, e.context_source);
    pools_before += fit.bytes;
    fits.push_back(std::move(fit));
  }
  return fits;
}

int64_t fit_context(const Model& model, int64_t requested_ctx, KvType kv_type, uint64_t available_bytes,
                    const std::string& size_source, std::string* note) {
  const ModelConfig& c = model.config();
  const int64_t n_ctx = usable_context(c, requested_ctx);
  if (available_bytes == 0) return n_ctx;
  const uint64_t kv = kv_cache_bytes_for_context(c, n_ctx, kv_type);
  if (requested_ctx > 0) {
    require_kv_cache_fits_in_memory(model, kv, available_bytes, size_source);
    return n_ctx;
  }
  const uint64_t budget = kv_cache_budget_bytes(model, available_bytes);
  if (kv <= budget) return n_ctx;
  const int64_t fits = context_that_fits(c, budget, kv_type);
  if (fits <= 0) {  // not one block beside the weights: fails unless the cache fits in the reserve
    require_kv_cache_fits_in_memory(model, kv, available_bytes, size_source);
    return n_ctx;
  }
  if (note) {
    *note = fmt::format("context limited to {} positions (the model's {} need a {:.1f} GiB KV cache; {:.1f} GiB is "
                        "left after the weights)",
                        fits, n_ctx, double(kv) / kGiB, double(budget) / kGiB);
  }
  return fits;
}

}  // namespace tessera
