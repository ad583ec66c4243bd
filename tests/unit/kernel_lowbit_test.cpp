// FP8 E4M3 and INT4 group-wise weights: format round trips, matmul at every ISA level against the scalar
// reference (bound from the data) on odd sizes, and batch invariance bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/fp16.h"
#include "core/fp8.h"
#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/lowbit.h"
#include "kernels/matmul.h"

namespace tessera {
namespace {

using testing::kernel_isas;
using testing::random_floats;

TEST(LowbitFp8, EveryCodeRoundTripsThroughCoreConversions) {
  for (int v = 0; v < 256; ++v) {
    const float f = fp8_e4m3_to_fp32(uint8_t(v));
    if ((v & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(f));
      continue;
    }
    EXPECT_EQ(fp32_to_fp8_e4m3(f), v) << "code " << v << " value " << f;
  }
  EXPECT_EQ(fp8_e4m3_to_fp32(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x01), 1.0f / 512.0f);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp8_e4m3(1e9f), 0x7E);           // saturates
  EXPECT_EQ(fp32_to_fp8_e4m3(-1e9f), 0xFE);
  EXPECT_EQ(fp32_to_fp8_e4m3(1.0625f), fp32_to_fp8_e4m3(1.0f));  // tie to even mantissa
  EXPECT_EQ(fp32_to_fp8_e4m3(1.1875f), fp32_to_fp8_e4m3(1.25f));
}

TEST(LowbitFp8, RowErrorWithinHalfStep) {
  const auto x = random_floats(357, 3);
  std::vector<uint8_t> q(x.size());
  std::vector<float> back(x.size());
  const float scale = quantize_row_fp8(x.data(), int64_t(x.size()), q.data());
  dequantize_row_fp8(q.data(), int64_t(x.size()), scale, back.data());
  for (size_t i = 0; i < x.size(); ++i) {
    // 3 mantissa bits: half a step is 1/16 of the value's binade, or 2^-10 · scale for subnormals.
    const double bound = std::max(std::fabs(double(x[i])) / 16.0, double(std::ldexp(scale, -10))) * 1.0001;
    ASSERT_NEAR(back[i], x[i], bound) << i;
  }
}

TEST(LowbitInt4, RowErrorWithinHalfStepAnyGroupAndLength) {
  for (int64_t group : {32, 128}) {
    for (int64_t n : {1, 31, 64, 172, 357}) {
      const auto x = random_floats(size_t(n), uint32_t(n + group));
      std::vector<uint8_t> q(int4_row_bytes(n));
      std::vector<uint16_t> s(size_t(int4_n_groups(n, group))), z(s.size());
      std::vector<float> back(static_cast<size_t>(n));
      quantize_row_int4(x.data(), n, group, q.data(), s.data(), z.data());
      dequantize_row_int4(q.data(), n, group, s.data(), z.data(), back.data());
      for (int64_t i = 0; i < n; ++i) {
        const double step = fp16_to_fp32(s[size_t(i / group)]);
        ASSERT_NEAR(back[size_t(i)], x[size_t(i)], 0.52 * step + 1e-7) << "group " << group << " n " << n << " i " << i;
      }
      // Padding nibbles of a partial last chunk stay zero.
      for (int64_t i = n; i < int64_t(q.size()) * 2; ++i) ASSERT_EQ(int4_get(q.data(), i), 0);
    }
  }
  std::vector<uint8_t> q(16);
  uint16_t s, z;
  EXPECT_THROW(quantize_row_int4(random_floats(32, 1).data(), 32, 48, q.data(), &s, &z), Error);
}

TEST(LowbitInt4, ConstantAndZeroGroups) {
  const std::vector<float> zeros(40, 0.0f), fives(40, 5.0f);
  std::vector<uint8_t> q(int4_row_bytes(40));
  std::vector<uint16_t> s(2), z(2);
  std::vector<float> back(40);
  quantize_row_int4(zeros.data(), 40, 32, q.data(), s.data(), z.data());
  dequantize_row_int4(q.data(), 40, 32, s.data(), z.data(), back.data());
  for (float v : back) EXPECT_EQ(v, 0.0f);
  quantize_row_int4(fives.data(), 40, 32, q.data(), s.data(), z.data());
  dequantize_row_int4(q.data(), 40, 32, s.data(), z.data(), back.data());
  for (float v : back) EXPECT_NEAR(v, 5.0f, 5.0f / 15.0f * 0.52);
}

// A low-bit weight matrix that owns its storage.
struct LowbitWeights {
  std::vector<uint8_t> data;
  std::vector<float> row_scales;
  std::vector<uint16_t> scales, zeros;
  std::vector<float> dequantized;  // [n_out, n_in]
  WeightMatrix view;
};

LowbitWeights make_lowbit(TensorType type, int64_t n_out, int64_t n_in, int64_t group, uint32_t seed) {
  LowbitWeights w;
  const auto values = random_floats(size_t(n_out * n_in), seed, 0.5f);
  WeightMatrix& v = w.view;
  v.type = type;
  v.n_out = n_out;
  v.n_in = n_in;
  if (type == TensorType::FP8_E4M3) {
    v.row_bytes = size_t(n_in);
    w.data.resize(v.row_bytes * size_t(n_out));
    w.row_scales.resize(size_t(n_out));
    for (int64_t r = 0; r < n_out; ++r)
      w.row_scales[size_t(r)] = quantize_row_fp8(&values[size_t(r * n_in)], n_in, &w.data[r * v.row_bytes]);
    v.row_scales = w.row_scales.data();
  } else {
    v.row_bytes = int4_row_bytes(n_in);
    v.group_size = int32_t(group);
    const int64_t ng = int4_n_groups(n_in, group);
    w.data.resize(v.row_bytes * size_t(n_out));
    w.scales.resize(size_t(n_out * ng));
    w.zeros.resize(w.scales.size());
    for (int64_t r = 0; r < n_out; ++r)
      quantize_row_int4(&values[size_t(r * n_in)], n_in, group, &w.data[r * v.row_bytes], &w.scales[size_t(r * ng)],
                        &w.zeros[size_t(r * ng)]);
    v.group_scales = w.scales.data();
    v.group_zeros = w.zeros.data();
  }
  v.data = w.data.data();
  w.dequantized.resize(values.size());
  for (int64_t r = 0; r < n_out; ++r) dequantize_weight_row(v, r, &w.dequantized[size_t(r * n_in)]);
  return w;
}

// fp32 rounding of two dot products, plus (INT4: per-token int8 activations) half an activation step times Σ|w|.
double error_bound(TensorType type, const float* w, const float* x, int64_t n) {
  constexpr double kEps = 1.0 / (1 << 23);
  double abs_dot = 0.0, amax = 0.0, wsum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    abs_dot += std::fabs(double(w[i]) * x[i]);
    amax = std::max(amax, double(std::fabs(x[i])));
    wsum += std::fabs(w[i]);
  }
  const double quant = type == TensorType::INT4 ? 0.5 * amax / 127.0 * wsum * 1.001 : 0.0;
  return 2.0 * double(n) * kEps * abs_dot + quant + 1e-6;
}

struct LowbitCase {
  TensorType type;
  int64_t group;
  int64_t n_in;
};

std::string case_name(const LowbitCase& c, Isa isa) {
  std::string s = std::string(tensor_type_name(c.type));
  if (c.type == TensorType::INT4) s += "_g" + std::to_string(c.group);
  return s + "_n" + std::to_string(c.n_in) + "_" + std::string(isa_name(isa));
}

class KernelLowbit : public ::testing::TestWithParam<std::tuple<LowbitCase, Isa>> {};

TEST_P(KernelLowbit, MatchesReferenceWithinDataBound) {
  const auto [c, isa] = GetParam();
  TESSERA_SKIP_IF_UNSUPPORTED(isa);
  const int64_t n_out = 37;
  const auto w = make_lowbit(c.type, n_out, c.n_in, c.group, 21);
  ThreadPool pool(2);
  for (int64_t n_tokens : {1, 2, 3, 4, 5, 7, 16, 33}) {
    const auto x = random_floats(size_t(n_tokens * c.n_in), 200 + uint32_t(n_tokens));
    std::vector<float> y(static_cast<size_t>(n_tokens * n_out)), y_ref(y.size());
    matmul(w.view, x.data(), n_tokens, y.data(), pool, isa);
    matmul_reference(w.view, x.data(), n_tokens, y_ref.data(), pool);
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t o = 0; o < n_out; ++o) {
        const double bound = error_bound(c.type, &w.dequantized[size_t(o * c.n_in)], &x[size_t(t * c.n_in)], c.n_in);
        ASSERT_NEAR(y[size_t(t * n_out + o)], y_ref[size_t(t * n_out + o)], bound)
            << case_name(c, isa) << " n_tokens " << n_tokens << " t " << t << " o " << o;
      }
  }
}

TEST_P(KernelLowbit, BatchInvariant) {
  const auto [c, isa] = GetParam();
  TESSERA_SKIP_IF_UNSUPPORTED(isa);
  const int64_t n_out = 37, n_max = 21;
  const auto w = make_lowbit(c.type, n_out, c.n_in, c.group, 22);
  auto x = random_floats(size_t(n_max * c.n_in), 23);
  for (int64_t t = 0; t < n_max; ++t)
    for (int64_t i = 0; i < c.n_in; ++i) x[size_t(t * c.n_in + i)] *= float(1 + t % 5) * (t % 3 == 0 ? 100.0f : 0.01f);
  ThreadPool one(1), two(2);
  std::vector<float> alone(static_cast<size_t>(n_max * n_out)), y(alone.size());
  for (int64_t t = 0; t < n_max; ++t) matmul(w.view, &x[size_t(t * c.n_in)], 1, &alone[size_t(t * n_out)], one, isa);
  for (ThreadPool* pool : {&one, &two}) {
    for (int64_t n = 1; n <= n_max; ++n) {
      const int64_t first = (n * 7) % (n_max - n + 1);
      matmul(w.view, &x[size_t(first * c.n_in)], n, y.data(), *pool, isa);
      for (int64_t t = 0; t < n; ++t)
        ASSERT_EQ(0, std::memcmp(&y[size_t(t * n_out)], &alone[size_t((first + t) * n_out)], sizeof(float) * n_out))
            << case_name(c, isa) << ": token " << first + t << " in a batch of " << n << " with " << pool->size()
            << " threads";
    }
  }
}

// q/k/v-style INT4 matrices on one input: one activation quantization and one parallel region, the same bits as
// one call per matrix.
TEST(KernelLowbitInt4, SharedInputEqualsSeparateCalls) {
  for (const Isa isa : kernel_isas()) {
    if (isa > detected_isa()) continue;
    for (const int64_t group : {32, 128}) {
      for (const int64_t n_in : {357, 2048}) {
        std::vector<LowbitWeights> w;
        for (int j = 0; j < 3; ++j) w.push_back(make_lowbit(TensorType::INT4, 37 + 16 * j, n_in, group, 50 + uint32_t(j)));
        for (const int threads : {1, 3}) {
          ThreadPool pool(threads);
          for (const int64_t n_tokens : {1, 6}) {
            const auto x = random_floats(size_t(n_tokens * n_in), 9 + uint32_t(n_tokens));
            testing::expect_shared_input_equals_separate({&w[0].view, &w[1].view, &w[2].view}, x, n_tokens, pool,
                                                         isa, "g" + std::to_string(group) + " n_in " + std::to_string(n_in));
          }
        }
      }
    }
  }
}

// Activations with NaN, infinite and huge values give a batch (the 512-bit tiles where the level has them) the
// bits of its tokens alone (the 1-token path; NaN wherever alone gave NaN), as the interleaved types do
// (kernel_interleave_test.cpp).
TEST(KernelLowbitInt4, NonFiniteActivationsKeepBatchInvariance) {
  const int64_t n_in = 512, n_out = 37, n_tokens = 16;
  const auto x = testing::non_finite_activations(n_in, 61);
  for (const int64_t group : {32, 128}) {
    const auto w = make_lowbit(TensorType::INT4, n_out, n_in, group, 62);
    for (const Isa isa : kernel_isas()) {
      if (isa > detected_isa()) continue;
      ThreadPool one(1), two(2);
      std::vector<float> alone(size_t(n_tokens * n_out)), y(alone.size());
      for (int64_t t = 0; t < n_tokens; ++t) matmul(w.view, &x[size_t(t * n_in)], 1, &alone[size_t(t * n_out)], one, isa);
      matmul(w.view, x.data(), n_tokens, y.data(), two, isa);
      ASSERT_NO_FATAL_FAILURE(testing::expect_same_bits_or_both_nan(
          y, alone, n_out, "g" + std::to_string(group) + " at " + std::string(isa_name(isa))));
    }
  }
}

// Rows handed out in 64-row chunks (several per thread, taken by whichever thread is free): a thread computes
// many chunks reading the token pairs it packed once, a second matrix of the same input reads them too, and the
// next product, of other activations at the same addresses, must not. Every token gets the bits it gets alone.
TEST(KernelLowbitInt4, RowChunksGiveTheSameBits) {
  const int64_t n_in = 512, n_out = 600, n_tokens = 9;
  const auto x = random_floats(size_t(n_tokens * n_in), 71), x2 = random_floats(size_t(n_tokens * n_in), 72);
  for (const int64_t group : {32, 128}) {
    const auto w = make_lowbit(TensorType::INT4, n_out, n_in, group, 73);
    for (const Isa isa : kernel_isas()) {
      if (isa > detected_isa()) continue;
      ThreadPool one(1);
      std::vector<float> alone(size_t(n_tokens * n_out)), alone2(alone.size());
      for (int64_t t = 0; t < n_tokens; ++t) {
        matmul(w.view, &x[size_t(t * n_in)], 1, &alone[size_t(t * n_out)], one, isa);
        matmul(w.view, &x2[size_t(t * n_in)], 1, &alone2[size_t(t * n_out)], one, isa);
      }
      for (const int threads : {2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> y(alone.size()), y_second(alone.size());
        const MatmulTarget targets[] = {{&w.view, y.data()}, {&w.view, y_second.data()}};
        matmul_shared_input(targets, x.data(), n_tokens, pool, isa);
        const std::string where = "g" + std::to_string(group) + " at " + std::string(isa_name(isa)) + ", " +
                                  std::to_string(threads) + " threads";
        EXPECT_EQ(0, std::memcmp(y.data(), alone.data(), sizeof(float) * y.size())) << where;
        EXPECT_EQ(0, std::memcmp(y_second.data(), alone.data(), sizeof(float) * y.size())) << where << ", second";
        matmul(w.view, x2.data(), n_tokens, y.data(), pool, isa);
        EXPECT_EQ(0, std::memcmp(y.data(), alone2.data(), sizeof(float) * y.size())) << where << ", next product";
      }
    }
  }
}

std::vector<LowbitCase> lowbit_cases() {
  return {{TensorType::FP8_E4M3, 0, 172}, {TensorType::FP8_E4M3, 0, 357}, {TensorType::FP8_E4M3, 0, 256},
          {TensorType::INT4, 32, 172},    {TensorType::INT4, 32, 357},    {TensorType::INT4, 128, 172},
          {TensorType::INT4, 128, 512},   {TensorType::INT4, 128, 357},
          // An odd chunk count (a lone last chunk), whole pairs, a long row split into several unpacked row
          // blocks, group 64, and group 96 (pairs straddle groups: the reference path).
          {TensorType::INT4, 32, 1000},   {TensorType::INT4, 32, 2048},   {TensorType::INT4, 128, 4128},
          {TensorType::INT4, 64, 300},    {TensorType::INT4, 96, 357},
          // Group 256: four pairs per group, the general path of the 512-bit tiles.
          {TensorType::INT4, 256, 1100}};
}

INSTANTIATE_TEST_SUITE_P(LowbitTypes, KernelLowbit,
                         ::testing::Combine(::testing::ValuesIn(lowbit_cases()), ::testing::ValuesIn(kernel_isas())),
                         [](const auto& info) { return case_name(std::get<0>(info.param), std::get<1>(info.param)); });

}  // namespace
}  // namespace tessera
