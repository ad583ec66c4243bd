// The GGUF tensor types' block layout and names, read from the weight-type registry (core/weight_types.h).
#include "core/tensor_type.h"

#include "core/weight_types.h"

namespace tessera {

std::optional<TensorTypeTraits> tensor_type_traits(uint32_t type_id) {
  for (const WeightTypeInfo& w : kWeightTypes) {
    // Internal types are not GGUF ids: a file that uses one is rejected like any unknown id.
    if (static_cast<uint32_t>(w.traits.type) == type_id && w.on_disk) return w.traits;
  }
  return std::nullopt;
}

const TensorTypeTraits& traits(TensorType type) { return weight_type_info(type).traits; }

std::string_view tensor_type_name(TensorType type) { return traits(type).name; }

}  // namespace tessera
