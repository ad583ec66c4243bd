// KV-cache sizing, the one home of it: the block size and the default pool (room for every sequence at full
// length, capped), the bytes a context takes, the longest context a budget holds (the floor rule), the reserve
// kept beside the weights, and the fit-or-shrink decisions of a serving pool and of a single sequence's context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/kv_type.h"
#include "model/model_config.h"

namespace tessera {

class Model;
struct EngineOptions;

inline constexpr int64_t kDefaultKvBlockSize = 16;               // token positions per block
inline constexpr uint64_t kDefaultKvCacheCapBytes = uint64_t{2} << 30;  // a derived pool never exceeds this
// A context shrunk to fit memory is a multiple of this many positions (of the block size below it): round
// numbers in the note a user reads, and whole blocks either way.
inline constexpr int64_t kContextGranule = 256;

uint64_t kv_block_bytes(const ModelConfig& config, int64_t block_size, KvType kv_type);
// Blocks that hold n_positions positions.
int64_t kv_blocks_for_context(int64_t n_positions, int64_t block_size = kDefaultKvBlockSize);
// The cache one sequence of n_ctx positions takes.
uint64_t kv_cache_bytes_for_context(const ModelConfig& config, int64_t n_ctx, KvType kv_type,
                                    int64_t block_size = kDefaultKvBlockSize);
// The longest context whose cache fits in `budget_bytes` (a multiple of kContextGranule positions when at
// least that, else of the block size; 0 when not even one block fits).
int64_t context_that_fits(const ModelConfig& config, uint64_t budget_bytes, KvType kv_type,
                          int64_t block_size = kDefaultKvBlockSize);

// What the KV cache may take when its size is derived rather than given: the memory available after the
// weights, less a reserve for activations, logits and the rest of the process (1/16 of what is available, at
// least 256 MiB). UINT64_MAX when `available_bytes` is 0 (unknown), 0 when nothing is left.
uint64_t kv_cache_budget_bytes(const Model& model, uint64_t available_bytes);

// The pool an engine with `options` gets on a model with `config`: its block count (options.kv_blocks, else
// options.kv_cache_bytes, else room for max_seqs full-length sequences within kDefaultKvCacheCapBytes) and the
// bytes of one block. With a draft model (options.speculative) a block's bytes count the draft's block too:
// the draft's own cache has as many blocks as the target's (DraftModelProposer), so every size here (the
// cache bytes options give, the default cap, what fits) covers both caches.
int64_t engine_kv_blocks(const ModelConfig& config, const EngineOptions& options);
uint64_t engine_kv_block_bytes(const ModelConfig& config, const EngineOptions& options);

// Serving: checks the engine's pool against `available_bytes` (0: no check) beside the weights (the draft
// model's included, and its cache with the target's: engine_kv_block_bytes). A size the
// options give must fit (else tessera::Error naming `size_source`, else the option that set it); a derived
// one that does not is shrunk to the budget (options.kv_cache_bytes set; `note`, when given, says so), as long
// as one full-length sequence fits. Returns the pool's bytes. `context_source` names what set the context, for
// the error when not even one sequence fits (default "n_ctx N").
uint64_t fit_kv_pool(const Model& model, EngineOptions& options, uint64_t available_bytes,
                     const std::string& size_source = {}, std::string* note = nullptr,
                     const std::string& context_source = {});

// Engines that share the memory (a served model and its fallback), each with its model, its options (the pool
// size written back as fit_kv_pool does) and what set its sizes in the caller's terms (fit_kv_pool's sources).
struct KvPoolRequest {
  const Model* model = nullptr;
  EngineOptions* options = nullptr;
  std::string size_source;
  std::string context_source;
};
struct KvPoolFit {
  uint64_t bytes = 0;
  std::string note;  // set when a derived pool was shrunk to fit
};
// Sets every model's weights (draft models' too) aside first (all are loaded before any pool is allocated),
// then fits each pool in
// order to what the weights and the pools before it leave, by fit_kv_pool: so the first engine gets the larger
// share when memory is short. `available_bytes` 0: no check.
std::vector<KvPoolFit> fit_kv_pools(const std::vector<KvPoolRequest>& engines, uint64_t available_bytes);

// One sequence (`tessera run`): the context to allocate. A requested one (requested_ctx > 0) must fit beside
// the weights (else tessera::Error naming `size_source`); otherwise the model's training context, or when its
// cache does not fit the budget, the longest that does (`note` says so). A `draft` model's weights and its own
// cache for the same context (as many blocks of kDefaultKvBlockSize) share the memory.
int64_t fit_context(const Model& model, int64_t requested_ctx, KvType kv_type, uint64_t available_bytes,
                    const std::string& size_source, std::string* note = nullptr, const Model* draft = nullptr);

}  // namespace tessera
