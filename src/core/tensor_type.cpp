// Block layout table for the GGUF tensor types.
#include "core/tensor_type.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "core/check.h"

namespace tessera {
namespace {

constexpr std::array kTraits = {
    TensorTypeTraits{TensorType::F32, "F32", 1, 4},     TensorTypeTraits{TensorType::F16, "F16", 1, 2},
    TensorTypeTraits{TensorType::Q4_0, "Q4_0", 32, 18}, TensorTypeTraits{TensorType::Q4_1, "Q4_1", 32, 20},
    TensorTypeTraits{TensorType::Q5_0, "Q5_0", 32, 22}, TensorTypeTraits{TensorType::Q5_1, "Q5_1", 32, 24},
    TensorTypeTraits{TensorType::Q8_0, "Q8_0", 32, 34}, TensorTypeTraits{TensorType::Q8_1, "Q8_1", 32, 36},
    TensorTypeTraits{TensorType::Q2_K, "Q2_K", 256, 84}, TensorTypeTraits{TensorType::Q3_K, "Q3_K", 256, 110},
    TensorTypeTraits{TensorType::Q4_K, "Q4_K", 256, 144}, TensorTypeTraits{TensorType::Q5_K, "Q5_K", 256, 176},
    TensorTypeTraits{TensorType::Q6_K, "Q6_K", 256, 210}, TensorTypeTraits{TensorType::Q8_K, "Q8_K", 256, 292},
    TensorTypeTraits{TensorType::I8, "I8", 1, 1},       TensorTypeTraits{TensorType::I16, "I16", 1, 2},
    TensorTypeTraits{TensorType::I32, "I32", 1, 4},     TensorTypeTraits{TensorType::I64, "I64", 1, 8},
    TensorTypeTraits{TensorType::F64, "F64", 1, 8},     TensorTypeTraits{TensorType::BF16, "BF16", 1, 2},
    TensorTypeTraits{TensorType::FP8_E4M3, "FP8_E4M3", 1, 1},
    // INT4 rows are padded to whole 32-value chunks: row bytes = ceil(n / 32) * 16 (see kernels/lowbit.h).
    TensorTypeTraits{TensorType::INT4, "INT4", 32, 16},
};

}  // namespace

std::optional<TensorTypeTraits> tensor_type_traits(uint32_t type_id) {
  for (const auto& t : kTraits) {
    // Internal types are not GGUF ids: a file that uses one is rejected like any unknown id.
    if (static_cast<uint32_t>(t.type) == type_id && !is_internal_tensor_type(t.type)) return t;
  }
  return std::nullopt;
}

const TensorTypeTraits& traits(TensorType type) {
  for (const auto& t : kTraits) {
    if (t.type == type) return t;
  }
  TESSERA_CHECK(false && "tensor type missing from the traits table");
  std::abort();
}

std::string_view tensor_type_name(TensorType type) { return traits(type).name; }

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  for (const auto& t : kTraits) {
    if (t.name.size() == name.size() &&
        std::equal(name.begin(), name.end(), t.name.begin(), [](char a, char b) {
          return std::toupper(static_cast<unsigned char>(a)) == std::toupper(static_cast<unsigned char>(b));
        })) {
      return t.type;
    }
  }
  return std::nullopt;
}

}  // namespace tessera
