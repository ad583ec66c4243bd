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

// The draft model an engine with `options` runs beside its model (its cache sized as the target's), or none.
const Model* draft_of(const EngineOptions& options) {
  const SpeculativeOptions& spec = options.speculative;
  return spec.method == SpecMethod::Draft ? spec.draft_model.get() : nullptr;
}

uint64_t weights_with(const Model& model, const Model* draft) {
  return model.weight_bytes() + (draft ? draft->weight_bytes() : 0);
}

// One block of the target's cache and, with a draft, one of the draft's: the engine gives both caches the same
// number of blocks, so a block of the pool costs both.
uint64_t block_bytes_with(const ModelConfig& c, const Model* draft, int64_t block_size, KvType kv_type) {
  return kv_block_bytes(c, block_size, kv_type) + (draft ? kv_block_bytes(draft->config(), block_size, kv_type) : 0);
}

// What the caches may take when `weights` sit beside them: kv_cache_budget_bytes's rule.
uint64_t kv_budget(uint64_t weights, uint64_t available_bytes) {
  if (available_bytes == 0) return std::numeric_limits<uint64_t>::max();
  const uint64_t reserve = std::max<uint64_t>(available_bytes / 16, uint64_t{256} << 20);
  const uint64_t taken = weights + reserve;
  return available_bytes > taken ? available_bytes - taken : 0;
}

// context_that_fits's rule for blocks of `block_bytes`.
int64_t positions_that_fit(uint64_t budget_bytes, uint64_t block_bytes, int64_t block_size) {
  const int64_t positions = int64_t(budget_bytes / block_bytes) * block_size;
  return positions >= kContextGranule ? positions / kContextGranule * kContextGranule : positions;
}

// The memory check for n_blocks blocks of each cache (the target's and the draft's), sizes split for the message.
void require_blocks_fit(const Model& model, const Model* draft, int64_t n_blocks, int64_t block_size,
                        KvType kv_type, uint64_t available_bytes, const std::string& source) {
  const uint64_t target = uint64_t(n_blocks) * kv_block_bytes(model.config(), block_size, kv_type);
  const uint64_t own = draft ? uint64_t(n_blocks) * kv_block_bytes(draft->config(), block_size, kv_type) : 0;
  require_kv_cache_fits_in_memory(model, target, available_bytes, source, {draft, own});
}

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
  return positions_that_fit(budget_bytes, kv_block_bytes(c, block_size, kv_type), block_size);
}

uint64_t kv_cache_budget_bytes(const Model& model, uint64_t available_bytes) {
  return kv_budget(model.weight_bytes(), available_bytes);
}

uint64_t engine_kv_block_bytes(const ModelConfig& c, const EngineOptions& options) {
  return block_bytes_with(c, draft_of(options), options.kv_block_size, options.kv_type);
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
  const Model* draft = draft_of(options);
  const uint64_t block_bytes = engine_kv_block_bytes(c, options);
  const int64_t planned_blocks = engine_kv_blocks(c, options);
  const uint64_t planned = uint64_t(planned_blocks) * block_bytes;
  if (available_bytes == 0) return planned;
  if (options.kv_blocks > 0 || options.kv_cache_bytes > 0) {
    require_blocks_fit(model, draft, planned_blocks, options.kv_block_size, options.kv_type, available_bytes,
                       !size_source.empty()    ? size_source
                       : options.kv_blocks > 0 ? fmt::format("kv_blocks {}", options.kv_blocks)
                                               : fmt::format("kv_cache_bytes {}", options.kv_cache_bytes));
    return planned;
  }
  const uint64_t budget = kv_budget(weights_with(model, draft), available_bytes);
  if (planned <= budget) return planned;
  // Less than one full-length sequence fits: say so now rather than reject every long request later.
  const int64_t n_ctx = usable_context(c, options.n_ctx);
  const int64_t sequence_blocks = kv_blocks_for_context(n_ctx, options.kv_block_size);
  const uint64_t one_sequence = uint64_t(sequence_blocks) * block_bytes;
  if (budget < one_sequence) {
    require_blocks_fit(model, draft, sequence_blocks, options.kv_block_size, options.kv_type, available_bytes,
                       (context_source.empty() ? fmt::format("n_ctx {}", n_ctx) : context_source) + " (one sequence)");
  }
  // One full-length sequence is the floor, taken from the reserve when it must: a smaller pool would refuse
  // long requests one by one (and a budget of 0 would read as "derive the default" and allocate it all).
  options.kv_cache_bytes = std::max(budget, one_sequence);
  const uint64_t bytes = uint64_t(engine_kv_blocks(c, options)) * block_bytes;
  if (note) {
    *note = fmt::format("KV cache limited to {:.2f} GiB ({} positions{}) by the memory left after the weights",
                        double(bytes) / kGiB, bytes / block_bytes * uint64_t(options.kv_block_size),
                        draft ? ", the draft model's cache included" : "");
  }
  return bytes;
}

std::vector<KvPoolFit> fit_kv_pools(const std::vector<KvPoolRequest>& engines, uint64_t available_bytes) {
  uint64_t all_weights = 0;
  for (const KvPoolRequest& e : engines) all_weights += weights_with(*e.model, draft_of(*e.options));
  std::vector<KvPoolFit> fits;
  uint64_t pools_before = 0;
  for (const KvPoolRequest& e : engines) {
    // fit_kv_pool counts the engine's own weights (its draft's included); the others' and their pools are gone.
    const uint64_t others = all_weights - weights_with(*e.model, draft_of(*e.options)) + pools_before;
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
                    const std::string& size_source, std::string* note, const Model* draft) {
  const ModelConfig& c = model.config();
  const int64_t n_ctx = usable_context(c, requested_ctx);
  if (available_bytes == 0) return n_ctx;
  const uint64_t block_bytes = block_bytes_with(c, draft, kDefaultKvBlockSize, kv_type);
  const int64_t n_blocks = kv_blocks_for_context(n_ctx);
  const uint64_t kv = uint64_t(n_blocks) * block_bytes;
  if (requested_ctx > 0) {
    require_blocks_fit(model, draft, n_blocks, kDefaultKvBlockSize, kv_type, available_bytes, size_source);
    return n_ctx;
  }
  const uint64_t budget = kv_budget(weights_with(model, draft), available_bytes);
  if (kv <= budget) return n_ctx;
  const int64_t fits = positions_that_fit(budget, block_bytes, kDefaultKvBlockSize);
  if (fits <= 0) {  // not one block beside the weights: fails unless the cache fits in the reserve
    require_blocks_fit(model, draft, n_blocks, kDefaultKvBlockSize, kv_type, available_bytes, size_source);
    return n_ctx;
  }
  if (note) {
    *note = fmt::format("context limited to {} positions (the model's {} need a {:.1f} GiB KV cache{}; {:.1f} GiB "
                        "is left after the weights)",
                        fits, n_ctx, double(kv) / kGiB, draft ? ", the draft model's included" : "",
                        double(budget) / kGiB);
  }
  return fits;
}

}  // namespace tessera
