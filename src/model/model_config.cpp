// Checks on a ModelConfig that the runtimes share.
#include "model/model_config.h"

#include "core/error.h"

namespace tessera {

int64_t usable_context(const ModelConfig& config, int64_t requested) {
  const int64_t n_ctx = requested > 0 ? requested : config.n_ctx_train;
  if (config.sliding_window > 0 && n_ctx > config.sliding_window) {
    fail("a context of {} tokens is longer than the model's {}-token sliding attention window, which Tessera does "
         "not implement (it attends over the whole context); use -c {} or less",
         n_ctx, config.sliding_window, config.sliding_window);
  }
  return n_ctx;
}

}  // namespace tessera
