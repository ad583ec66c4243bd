// The weight-type registry (core/weight_types.h): the --type parser, the GGUF id lookup, and the kernel types.
#include "core/weight_types.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

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
      if (k) {
        EXPECT_TRUE(seen.insert(*k).second) << w.traits.name;
      }
    }
  }
  EXPECT_EQ(seen.size(), size_t(kKernelTypeCount));
}

// Help texts and errors print weight_type_names(): each listed name parses to a row the filter keeps, and every
// such row is listed once.
TEST(WeightTypes, TheListedNamesAreExactlyTheParsableOnesTheFilterKeeps) {
  const auto split = [](const std::string& list) {
    std::vector<std::string> names;
    for (size_t start = 0; start <= list.size();) {
      const size_t end = std::min(list.find(", ", start), list.size());
      names.push_back(list.substr(start, end - start));
      start = end + 2;
    }
    return names;
  };
  const auto quantizer_rows = [](const WeightTypeInfo& w) { return w.quantizer_output; };
  for (bool quantizer_only : {false, true}) {
    const std::vector<std::string> names = split(weight_type_names(quantizer_only ? +quantizer_rows : nullptr));
    std::set<TensorType> listed;
    for (const std::string& name : names) {
      const std::optional<TensorType> t = weight_type_from_name(name);
      ASSERT_TRUE(t.has_value()) << "'" << name << "'";
      EXPECT_TRUE(listed.insert(*t).second) << name << " listed twice";
      if (quantizer_only) {
        EXPECT_TRUE(weight_type_info(*t).quantizer_output) << name;
      }
    }
    size_t expected = 0;
    for (const WeightTypeInfo& w : kWeightTypes) expected += !w.cli_name.empty() && (!quantizer_only || w.quantizer_output);
    EXPECT_EQ(listed.size(), expected);
  }
}

}  // namespace
}  // namespace tessera
