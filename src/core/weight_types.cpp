// The weight-type registry's lookups, and the compile-time checks that keep the enums it describes in step with it.
#include "core/weight_types.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "core/check.h"

namespace tessera {
namespace {

// Every kernel type stands for exactly one (weight type, layout) pair.
constexpr bool each_kernel_type_once() {
  for (int k = 0; k < kKernelTypeCount; ++k) {
    int uses = 0;
    for (const WeightTypeInfo& w : kWeightTypes) {
      for (const std::optional<KernelType>& kernel : {w.rows_kernel, w.interleaved_kernel, w.panel_kernel}) {
        uses += kernel == static_cast<KernelType>(k);
      }
    }
    if (uses != 1) return false;
  }
  return true;
}
static_assert(each_kernel_type_once(), "each KernelType must appear once in kWeightTypes");

// One row per type, and the in-memory-only types are exactly those tensor_type.h numbers from 1000.
constexpr bool rows_consistent() {
  for (size_t i = 0; i < kWeightTypes.size(); ++i) {
    const WeightTypeInfo& w = kWeightTypes[i];
    if (w.on_disk == (static_cast<uint32_t>(w.traits.type) >= 1000)) return false;
    if (w.quantizer_output && w.cli_name.empty()) return false;
    for (size_t j = 0; j < i; ++j) {
      if (kWeightTypes[j].traits.type == w.traits.type) return false;
    }
  }
  return true;
}
static_assert(rows_consistent(), "kWeightTypes: one row per type, on_disk as is_internal_tensor_type says");

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

const WeightTypeInfo& weight_type_info(TensorType type) {
  const WeightTypeInfo* w = find_weight_type(type);
  TESSERA_CHECK(w != nullptr && "tensor type missing from the weight-type registry");
  return *w;
}

std::optional<TensorType> weight_type_from_name(std::string_view name) {
  for (const WeightTypeInfo& w : kWeightTypes) {
    if (!w.cli_name.empty() && equal_ignoring_case(w.cli_name, name)) return w.traits.type;
  }
  return std::nullopt;
}

std::string weight_type_names(bool (*offered)(const WeightTypeInfo&)) {
  std::string names;
  for (const WeightTypeInfo& w : kWeightTypes) {
    if (w.cli_name.empty() || (offered != nullptr && !offered(w))) continue;
    names += (names.empty() ? "" : ", ") + std::string(w.cli_name);
  }
  return names;
}

}  // namespace tessera
