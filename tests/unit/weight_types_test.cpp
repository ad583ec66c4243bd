// The weight-type registry (core/weight_types.h): the --type parser, the GGUF id lookup, and the kernel types.
#include "core/weight_types.h"

#include <gtest/gtest.h>

#include <set>

namespace tessera {
namespace {

TEST(WeightTypes, ParsesEveryCommandLineNameInAnyCase) {
  for (const WeightTypeInfo& w : kWeightTypes) {
    if (w.cli_name.empty()) continue;
    std::string upper(w.cli_name);
    for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(weight_type_from_name(w.cli_name), w.traits.type) << w.cli_name;
    EXPECT_EQ(weight_type_from_name(upper), w.traits.type) << upper;
  }
  EXPECT_EQ(weight_type_from_name("Int8"), TensorType::I8);
  EXPECT_FALSE(weight_type_from_name("fp8_e4m3").has_value());  // GGUF's name, not the --type one
  EXPECT_FALSE(weight_type_from_name("").has_value());
}

TEST(WeightTypes, GgufIdsAreTheOnDiskTypesOnly) {
  for (const WeightTypeInfo& w : kWeightTypes) {
    const std::optional<TensorTypeTraits> t = tensor_type_traits(static_cast<uint32_t>(w.traits.type));
    EXPECT_EQ(t.has_value(), w.on_disk) << w.traits.name;
    EXPECT_EQ(is_internal_tensor_type(w.traits.type), !w.on_disk) << w.traits.name;
    EXPECT_EQ(&traits(w.traits.type), &weight_type_info(w.traits.type).traits) << w.traits.name;
  }
}

TEST(WeightTypes, EveryKernelTypeStandsForOneTypeAndLayout) {
  std::set<KernelType> seen;
  for (const WeightTypeInfo& w : kWeightTypes) {
    for (const std::optional<KernelType>& k : {w.rows_kernel, w.interleaved_kernel, w.panel_kernel}) {
      if (k) EXPECT_TRUE(seen.insert(*k).second) << w.traits.name;
    }
  }
  EXPECT_EQ(seen.size(), size_t(kKernelTypeCount));
}

}  // namespace
}  // namespace tessera
