#include "model/memory_fit.h"

#include "model/model.h"

namespace tessera {
namespace {

constexpr double kGiB = double(uint64_t{1} << 30);

}  // namespace

void require_weights_fit_in_memory(const Model& model, uint64_t available_bytes) {
  const uint64_t needed = model.weight_bytes();
  if (available_bytes == 0 || needed <= available_bytes) return;
  throw MemoryFitError(
      MemoryFitError::Part::Weights, {},
      fmt::format("{}: its weights need {:.1f} GiB of memory but only {:.1f} GiB is available; every generated "
                  "token reads all of them, so they would be read back from disk for each token",
                  model.name(), double(needed) / kGiB, double(available_bytes) / kGiB));
}

void require_kv_cache_fits_in_memory(const Model& model, uint64_t kv_bytes, uint64_t available_bytes,
                                     const std::string& kv_source, const DraftMemory& draft) {
  const uint64_t weights = model.weight_bytes();
  const uint64_t draft_weights = draft.model ? draft.model->weight_bytes() : 0;
  const uint64_t draft_kv = draft.model ? draft.kv_bytes : 0;
  if (available_bytes == 0 || weights + kv_bytes + draft_weights + draft_kv <= available_bytes) return;
  const std::string with_draft =
      draft.model ? fmt::format(", with the draft model {} (weights {:.1f} GiB, its KV cache {:.1f} GiB),",
                                draft.model->name(), double(draft_weights) / kGiB, double(draft_kv) / kGiB)
                  : std::string();
  MemoryFitError error(
      MemoryFitError::Part::KvCache, kv_source,
      fmt::format("{}: its weights ({:.1f} GiB) and the KV cache for {} ({:.1f} GiB){} need more than the {:.1f} GiB "
                  "of memory available",
                  model.name(), double(weights) / kGiB, kv_source, double(kv_bytes) / kGiB, with_draft,
                  double(available_bytes) / kGiB));
  error.with_draft = draft.model != nullptr;
  throw error;
}

}  // namespace tessera
