// The memory check that refuses a model whose weights cannot stay resident.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/memory_info.h"
#include "model/memory_fit.h"
#include "model/model.h"

namespace tessera {
namespace {

TEST(MemoryFit, RefusesWeightsLargerThanAvailableMemoryWithSizesAndTheOverride) {
  const auto model = Model::load_embedded();
  const uint64_t needed = model->weight_bytes();
  ASSERT_GT(needed, 1000u);
  EXPECT_NO_THROW(require_weights_fit_in_memory(*model, needed));
  EXPECT_NO_THROW(require_weights_fit_in_memory(*model, 0));  // unknown: no check
  try {
    require_weights_fit_in_memory(*model, needed - 1);
    FAIL() << "a model one byte too large was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("GiB of memory but only"), std::string::npos) << message;
    EXPECT_NE(message.find("--ignore-memory-check"), std::string::npos) << message;
    EXPECT_NE(message.find(model->name()), std::string::npos) << message;
  }
}

TEST(MemoryFit, ThisMachineReportsAvailableMemory) {
  const uint64_t available = available_memory_bytes();
  EXPECT_GT(available, uint64_t{64} << 20);  // Linux reports MemAvailable; any test machine has 64 MiB free
}

}  // namespace
}  // namespace tessera
