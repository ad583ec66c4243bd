#include "model/memory_fit.h"

#include "core/error.h"
#include "model/model.h"

namespace tessera {
namespace {

constexpr double kGiB = double(uint64_t{1} << 30);

}  // namespace

void require_weights_fit_in_memory(const Model& model, uint64_t available_bytes) {
  const uint64_t needed = model.weight_bytes();
  if (available_bytes == 0 || needed <= available_bytes) return;
  fail("{}: its weights need {:.1f} GiB of memory but only {:.1f} GiB is available; every generated token reads "
       "all of them, so they would be read back from disk for each token. Use a smaller quantization (tessera "
       "quantize --type int4) or pass --ignore-memory-check to load it anyway",
       model.name(), double(needed) / kGiB, double(available_bytes) / kGiB);
}

void require_kv_cache_fits_in_memory(const Model& model, uint64_t kv_bytes, uint64_t available_bytes,
                                     const std::string& kv_source) {
  const uint64_t weights = model.weight_bytes();
  if (available_bytes == 0 || weights + kv_bytes <= available_bytes) return;
  fail("{}: its weights ({:.1f} GiB) and the KV cache for {} ({:.1f} GiB) need more than the {:.1f} GiB of memory "
       "available. Lower {}, store the cache in 8 bits (--kv-type int8), or pass --ignore-memory-check",
       model.name(), double(weights) / kGiB, kv_source, double(kv_bytes) / kGiB, double(available_bytes) / kGiB,
       kv_source.substr(0, kv_source.find(' ')));
}

}  // namespace tessera
