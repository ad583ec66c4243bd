// quantize_row → dequantize_row round trips: per-type error limits on random rows, and edge rows (zeros,
// one outlier, all positive) that must stay finite and close.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernel_test_util.h"

namespace tessera {
namespace {

using testing::random_floats;

// Relative RMS error limits for N(0, 1) data: about 1.5× what the encodings achieve, so a regression in the
// scale search shows.
double rms_limit(TensorType type) {
  switch (type) {
    case TensorType::F16: return 3e-4;
    case TensorType::BF16: return 2.5e-3;
    case TensorType::I8: return 0.012;
    case TensorType::Q8_0: return 0.008;
    case TensorType::Q4_0: return 0.13;
    case TensorType::Q4_K: return 0.11;
    case TensorType::Q6_K: return 0.025;
    default: return 1e-9;  // F32 is exact
  }
}

double relative_rms_error(TensorType type, const std::vector<float>& x, double* max_abs_error) {
  const int64_t n = int64_t(x.size());
  std::vector<uint8_t> packed(tensor_row_bytes(type, uint64_t(n)));
  std::vector<float> back(x.size());
  float row_scale = 1.0f;
  quantize_row(type, x.data(), packed.data(), n, &row_scale);
  dequantize_row(type, packed.data(), back.data(), n, row_scale);
  double err = 0.0, ref = 0.0;
  *max_abs_error = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(std::isfinite(back[i])) << tensor_type_name(type) << " at " << i;
    err += (double(back[i]) - x[i]) * (double(back[i]) - x[i]);
    ref += double(x[i]) * x[i];
    *max_abs_error = std::max(*max_abs_error, std::fabs(double(back[i]) - x[i]));
  }
  return ref > 0.0 ? std::sqrt(err / ref) : std::sqrt(err);
}

class KernelQuant : public ::testing::TestWithParam<TensorType> {};

TEST_P(KernelQuant, RandomRowsWithinLimit) {
  const TensorType type = GetParam();
  const auto x = random_floats(256 * 9, 21);
  double max_abs = 0.0;
  const double rel = relative_rms_error(type, x, &max_abs);
  EXPECT_LT(rel, rms_limit(type)) << tensor_type_name(type);
  // No single value is off by more than a few steps of the coarsest scale (values are within ±5σ).
  EXPECT_LT(max_abs, 50.0 * rms_limit(type)) << tensor_type_name(type);
}

TEST_P(KernelQuant, EdgeRows) {
  const TensorType type = GetParam();
  const int64_t n = 512;
  double max_abs = 0.0;
  const std::vector<float> zeros(n, 0.0f);
  EXPECT_EQ(relative_rms_error(type, zeros, &max_abs), 0.0) << tensor_type_name(type);
  auto outlier = random_floats(n, 22, 0.01f);
  outlier[37] = 10.0f;
  relative_rms_error(type, outlier, &max_abs);
  EXPECT_LT(max_abs, 10.0 * 0.15) << tensor_type_name(type);  // the outlier itself survives
  auto positive = random_floats(n, 23);
  for (auto& v : positive) v = std::fabs(v) + 1.0f;
  EXPECT_LT(relative_rms_error(type, positive, &max_abs), rms_limit(type)) << tensor_type_name(type);
}

INSTANTIATE_TEST_SUITE_P(KernelTypes, KernelQuant, ::testing::ValuesIn(testing::matmul_types()),
                         [](const auto& info) { return std::string(tensor_type_name(info.param)); });

}  // namespace
}  // namespace tessera
