// Accessor for the bytes placed by embedded_model.S.
#include "model/embedded_model.h"

extern "C" const uint8_t tessera_embedded_model_begin[];
extern "C" const uint8_t tessera_embedded_model_end[];

namespace tessera {

std::span<const uint8_t> embedded_model_bytes() {
  return {tessera_embedded_model_begin, tessera_embedded_model_end};
}

}  // namespace tessera
