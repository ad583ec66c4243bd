#include "model/memory_fit.h"

#include "core/error.h"
#include "model/model.h"

namespace tessera {

void require_weights_fit_in_memory(const Model& model, uint64_t available_bytes) {
  const uint64_t needed = model.weight_bytes();
  if (available_bytes == 0 || needed <= available_bytes) return;
  constexpr double kGiB = double(uint64_t{1} << 30);
  fail("{}: its weights need {:.1f} GiB of memory but only {:.1f} GiB is available; every generated token reads "
       "all of them, so they would be read back from disk for each token. Use a smaller quantization (tessera "
       "quantize --type int4) or pass --ignore-memory-check to load it anyway",
       model.name(), double(needed) / kGiB, double(available_bytes) / kGiB);
}

}  // namespace tessera
