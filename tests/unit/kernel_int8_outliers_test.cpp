// I8 weights with an outlier threshold (LLM.int8()): the kernels at every ISA level against the scalar
// reference of the mixed-precision formula on odd sizes, bit-for-bit batch invariance with per-token outlier
// sets, the error drop on activations with outlier columns, and threshold validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/int8_outliers.h"
#include "kernels/matmul.h"

namespace tessera {
namespace {

using testing::kernel_isas;
using testing::make_weights;
using testing::random_floats;

// Normal activations with a few large values per token (a different set in each token, some tokens none).
std::vector<float> activations_with_outliers(int64_t n_tokens, int64_t n_in, uint32_t seed) {
  std::vector<float> x = random_floats(size_t(n_tokens * n_in), seed);
  std::mt19937 rng(seed + 1);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int n_outliers = int(t % 4);  // 0..3
    for (int k = 0; k < n_outliers; ++k) {
      const int64_t i = int64_t(rng() % uint32_t(n_in));
      x[size_t(t * n_in + i)] = (rng() % 2 ? 1.0f : -1.0f) * float(8 + rng() % 40);
    }
  }
  return x;
}

class Int8OutliersKernel : public ::testing::TestWithParam<Isa> {};

TEST_P(Int8OutliersKernel, MatchesScalarReferenceOnOddSizes) {
  const Isa isa = GetParam();
  TESSERA_SKIP_IF_UNSUPPORTED(isa);
  ThreadPool pool(2);
  for (int64_t n_in : {31, 357, 1003}) {
    const int64_t n_out = 37;
    auto w = make_weights(TensorType::I8, n_out, n_in, uint32_t(n_in));
    w.view.outlier_threshold = 6.0f;
    for (int64_t n_tokens : {1, 2, 3, 4, 5, 7, 16, 33}) {
      const auto x = activations_with_outliers(n_tokens, n_in, uint32_t(100 + n_tokens));
      std::vector<float> y(size_t(n_tokens * n_out)), want(y.size());
      matmul(w.view, x.data(), n_tokens, y.data(), pool, isa);
      if (isa == Isa::Scalar) {
        // The scalar level is the fp32 definition (every column in high precision), threshold or not.
        matmul_reference(w.view, x.data(), n_tokens, want.data(), pool);
        ASSERT_EQ(y, want);
        continue;
      }
      matmul_i8_outliers_reference(w.view, x.data(), n_tokens, want.data(), pool);
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t o = 0; o < n_out; ++o) {
          // Same integer sum; only fp32 rounding of the outlier sum and the final products may differ.
          double mag = 0.0;
          for (int64_t i = 0; i < n_in; ++i)
            mag += std::fabs(double(x[size_t(t * n_in + i)]) * w.dequantized[size_t(o * n_in + i)]);
          const double bound = 4.0 * double(n_in) * std::numeric_limits<float>::epsilon() * mag + 1e-6;
          ASSERT_NEAR(y[size_t(t * n_out + o)], want[size_t(t * n_out + o)], bound)
              << "n_in " << n_in << " n_tokens " << n_tokens << " t " << t << " o " << o;
        }
    }
  }
}

TEST_P(Int8OutliersKernel, BatchInvariantWithPerTokenOutliers) {
  const Isa isa = GetParam();
  TESSERA_SKIP_IF_UNSUPPORTED(isa);
  const int64_t n_in = 357, n_out = 41, n_max = 19;
  auto w = make_weights(TensorType::I8, n_out, n_in, 5);
  w.view.outlier_threshold = 6.0f;
  const auto x = activations_with_outliers(n_max, n_in, 6);
  ThreadPool one(1), two(2);
  std::vector<float> alone(size_t(n_max * n_out)), y(alone.size());
  for (int64_t t = 0; t < n_max; ++t) matmul(w.view, &x[size_t(t * n_in)], 1, &alone[size_t(t * n_out)], one, isa);
  for (ThreadPool* pool : {&one, &two}) {
    for (int64_t n = 1; n <= n_max; ++n) {
      const int64_t first = (n * 5) % (n_max - n + 1);
      matmul(w.view, &x[size_t(first * n_in)], n, y.data(), *pool, isa);
      for (int64_t t = 0; t < n; ++t)
        ASSERT_EQ(0, std::memcmp(&y[size_t(t * n_out)], &alone[size_t((first + t) * n_out)], sizeof(float) * n_out))
            << "token " << first + t << " in a batch of " << n << " with " << pool->size() << " threads";
    }
  }
}

// A threshold no activation exceeds changes nothing: the same bits as plain W8A8.
TEST_P(Int8OutliersKernel, NoOutlierAboveThresholdIsPlainW8A8) {
  const Isa isa = GetParam();
  TESSERA_SKIP_IF_UNSUPPORTED(isa);
  const int64_t n_in = 357, n_out = 37, n_tokens = 9;
  auto w = make_weights(TensorType::I8, n_out, n_in, 7);
  const auto x = random_floats(size_t(n_tokens * n_in), 8);
  ThreadPool pool(2);
  std::vector<float> plain(size_t(n_tokens * n_out)), high(plain.size());
  matmul(w.view, x.data(), n_tokens, plain.data(), pool, isa);
  w.view.outlier_threshold = 1e30f;
  matmul(w.view, x.data(), n_tokens, high.data(), pool, isa);
  EXPECT_EQ(plain, high);
}

// q/k/v-style I8 matrices on one input share the outlier split and the int8 activations: the same bits as one
// call per matrix.
TEST_P(Int8OutliersKernel, SharedInputEqualsSeparateCalls) {
  const Isa isa = GetParam();
  TESSERA_SKIP_IF_UNSUPPORTED(isa);
  const int64_t n_in = 357, n_tokens = 7;
  std::vector<testing::OwnedWeights> w;
  for (int j = 0; j < 3; ++j) {
    w.push_back(make_weights(TensorType::I8, 29 + 8 * j, n_in, 60 + uint32_t(j)));
    w.back().view.outlier_threshold = 6.0f;
  }
  const auto x = activations_with_outliers(n_tokens, n_in, 61);
  ThreadPool pool(3);
  testing::expect_shared_input_equals_separate({&w[0].view, &w[1].view, &w[2].view}, x, n_tokens, pool, isa,
                                               "threshold 6");
}

INSTANTIATE_TEST_SUITE_P(Isas, Int8OutliersKernel, ::testing::ValuesIn(kernel_isas()),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

// Activations like an LLM's: a few feature columns 20-60× larger than the rest in every token. Per-token int8
// then rounds every other column with a step set by the outliers; taking them out drops the error ~10× here.
TEST(Int8Outliers, ErrorDropsOnOutlierColumns) {
  if (kernel_isa(active_isa()) == Isa::Scalar) GTEST_SKIP() << "scalar level (no SIMD or TESSERA_ISA): fp32 anyway";
  const int64_t n_in = 1024, n_out = 256, n_tokens = 16;
  auto w = make_weights(TensorType::I8, n_out, n_in, 9);
  auto x = random_floats(size_t(n_tokens * n_in), 10);
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t col : {7, 300, 301, 999}) x[size_t(t * n_in + col)] = float((t % 2 ? -1 : 1) * (20 + col % 41));
  ThreadPool pool(2);
  std::vector<float> exact(size_t(n_tokens * n_out)), plain(exact.size()), mixed(exact.size());
  matmul_reference(w.view, x.data(), n_tokens, exact.data(), pool);  // fp32 activations, the same int8 weights
  matmul(w.view, x.data(), n_tokens, plain.data(), pool);
  w.view.outlier_threshold = 6.0f;
  matmul(w.view, x.data(), n_tokens, mixed.data(), pool);
  auto rms_error = [&](const std::vector<float>& y) {
    double e = 0.0;
    for (size_t i = 0; i < y.size(); ++i) e += (double(y[i]) - exact[i]) * (double(y[i]) - exact[i]);
    return std::sqrt(e / double(y.size()));
  };
  const double e_plain = rms_error(plain), e_mixed = rms_error(mixed);
  EXPECT_LT(e_mixed, e_plain / 5.0) << "W8A8 rms error " << e_plain << ", with outliers in fp32 " << e_mixed;
}

TEST(Int8Outliers, InvalidThresholdsFailClearly) {
  for (float bad : {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    try {
      check_int8_threshold(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("invalid INT8 outlier threshold"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(check_int8_threshold(0.0f));
  EXPECT_NO_THROW(check_int8_threshold(6.0f));
}

}  // namespace
}  // namespace tessera
