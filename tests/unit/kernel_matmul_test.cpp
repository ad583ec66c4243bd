// matmul at every ISA level the CPU has, against the scalar reference with an error bound derived from the
// data, and the batch-invariance contract checked bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"

namespace tessera {
namespace {

using testing::kernel_isas;
using testing::make_weights;
using testing::matmul_types;
using testing::odd_n_in;
using testing::random_floats;
using testing::error_bound;
using testing::quantizes_activations;

class KernelMatmul : public ::testing::TestWithParam<std::tuple<TensorType, Isa>> {};

TEST_P(KernelMatmul, MatchesReferenceWithinDataBound) {
  const auto [type, isa] = GetParam();
  TESSERA_SKIP_IF_UNSUPPORTED(isa);
  const int64_t n_in = odd_n_in(type), n_out = 37;
  const auto w = make_weights(type, n_out, n_in, 11);
  ThreadPool pool(2);
  for (int64_t n_tokens : {1, 2, 3, 4, 5, 6, 7, 33}) {
    const auto x = random_floats(size_t(n_tokens * n_in), 100 + uint32_t(n_tokens));
    std::vector<float> y(size_t(n_tokens * n_out)), y_ref(y.size());
    matmul(w.view, x.data(), n_tokens, y.data(), pool, isa);
    matmul_reference(w.view, x.data(), n_tokens, y_ref.data(), pool);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t o = 0; o < n_out; ++o) {
        const double bound = error_bound(type, &w.dequantized[o * n_in], &x[t * n_in], n_in);
        ASSERT_NEAR(y[t * n_out + o], y_ref[t * n_out + o], bound)
            << tensor_type_name(type) << " at " << isa_name(isa) << ", n_tokens " << n_tokens << ", t " << t
            << ", o " << o;
      }
    }
  }
}

// y[t] computed alone must equal, bit for bit, y[t] computed inside any batch, with 1 or 2 threads.
TEST_P(KernelMatmul, BatchInvariant) {
  const auto [type, isa] = GetParam();
  TESSERA_SKIP_IF_UNSUPPORTED(isa);
  const int64_t n_in = odd_n_in(type), n_out = 37, n_max = 37;
  const auto w = make_weights(type, n_out, n_in, 12);
  // Rows of very different magnitudes, so per-token scales differ a lot between neighbours in a batch.
  auto x = random_floats(size_t(n_max * n_in), 13);
  for (int64_t t = 0; t < n_max; ++t)
    for (int64_t i = 0; i < n_in; ++i) x[t * n_in + i] *= float(1 + t % 5) * (t % 3 == 0 ? 100.0f : 0.01f);
  ThreadPool one(1), two(2);
  std::vector<float> alone(size_t(n_max * n_out));
  for (int64_t t = 0; t < n_max; ++t) matmul(w.view, &x[t * n_in], 1, &alone[t * n_out], one, isa);
  std::vector<float> y(size_t(n_max * n_out));
  for (ThreadPool* pool : {&one, &two}) {
    for (int64_t n = 1; n <= n_max; ++n) {
      const int64_t first = (n * 7) % (n_max - n + 1);  // batches start at varied offsets
      matmul(w.view, &x[first * n_in], n, y.data(), *pool, isa);
      for (int64_t t = 0; t < n; ++t) {
        ASSERT_EQ(0, std::memcmp(&y[t * n_out], &alone[(first + t) * n_out], sizeof(float) * size_t(n_out)))
            << tensor_type_name(type) << " at " << isa_name(isa) << ": token " << first + t << " in a batch of " << n
            << " with " << pool->size() << " threads";
      }
    }
  }
}

// Enough rows for several row chunks (batched Q8_0 / Q4_0 convert each chunk's block scales once) with one and
// two threads, K with a tail after whole groups of 8 blocks: batched results equal single-token ones bit for
// bit and stay within the reference bound.
TEST_P(KernelMatmul, BatchInvariantAcrossRowChunks) {
  const auto [type, isa] = GetParam();
  TESSERA_SKIP_IF_UNSUPPORTED(isa);
  if (!quantizes_activations(type)) GTEST_SKIP() << "covered by BatchInvariant";
  const int64_t n_in = traits(type).block_elements == 256 ? 256 * 5 : 32 * 21, n_out = 301, n_max = 21;
  const auto w = make_weights(type, n_out, n_in, 21);
  const auto x = random_floats(size_t(n_max * n_in), 22);
  ThreadPool one(1), two(2);
  std::vector<float> alone(size_t(n_max * n_out)), y(alone.size()), y_ref(alone.size());
  for (int64_t t = 0; t < n_max; ++t) matmul(w.view, &x[t * n_in], 1, &alone[t * n_out], one, isa);
  matmul_reference(w.view, x.data(), n_max, y_ref.data(), one);
  for (int64_t t = 0; t < n_max; ++t) {
    for (int64_t o = 0; o < n_out; ++o) {
      ASSERT_NEAR(alone[t * n_out + o], y_ref[t * n_out + o],
                  error_bound(type, &w.dequantized[o * n_in], &x[t * n_in], n_in));
    }
  }
  for (ThreadPool* pool : {&one, &two}) {
    for (int64_t n : {2, 3, 4, 5, 8, 13, 16, 21}) {
      std::fill(y.begin(), y.end(), 0.0f);
      matmul(w.view, x.data(), n, y.data(), *pool, isa);
      ASSERT_EQ(0, std::memcmp(y.data(), alone.data(), sizeof(float) * size_t(n * n_out)))
          << tensor_type_name(type) << " at " << isa_name(isa) << ", batch of " << n << " with " << pool->size()
          << " threads";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KernelTypes, KernelMatmul,
                         ::testing::Combine(::testing::ValuesIn(matmul_types()), ::testing::ValuesIn(kernel_isas())),
                         [](const auto& info) {
                           return std::string(tensor_type_name(std::get<0>(info.param))) + "_" +
                                  std::string(isa_name(std::get<1>(info.param)));
                         });

// q, k and v (or gate and up) in one call give each output the bits of its own matmul, whether the set shares
// one parallel region (one activation format, or two quantized ones: Q4_K's beside Q6_K's, I8's beside Q8_0's)
// or is split (a float type beside quantized ones, three quantized formats), at every ISA level, thread count and
// batch size.
TEST(KernelMatmul, SharedInputEqualsSeparateCalls) {
  const int64_t n_in = 256 * 3;
  const std::vector<std::vector<TensorType>> sets = {
      {TensorType::Q8_0, TensorType::Q8_0, TensorType::Q8_0},
      {TensorType::Q4_K, TensorType::Q4_K, TensorType::Q6_K},
      {TensorType::I8, TensorType::I8},
      {TensorType::F16, TensorType::F16},
      {TensorType::Q8_0, TensorType::I8, TensorType::F32},
      {TensorType::Q8_0, TensorType::I8},
      {TensorType::Q8_0, TensorType::I8, TensorType::Q4_K},
  };
  for (const Isa isa : kernel_isas()) {
    if (isa > detected_isa()) continue;
    for (const int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (const auto& types : sets) {
        std::vector<testing::OwnedWeights> weights;
        for (size_t j = 0; j < types.size(); ++j) {
          weights.push_back(make_weights(types[j], 37 + 16 * int64_t(j), n_in, 40 + uint32_t(j)));
        }
        std::vector<const WeightMatrix*> ws;
        for (const auto& w : weights) ws.push_back(&w.view);
        for (const int64_t n_tokens : {1, 5}) {
          const auto x = random_floats(size_t(n_tokens * n_in), 7 + uint32_t(n_tokens));
          testing::expect_shared_input_equals_separate(ws, x, n_tokens, pool, isa, "");
        }
      }
    }
  }
}

// Each level's name reads back as that level (TESSERA_ISA takes them), except Avx512's: "avx512" names the best
// AVX-512 level below AMX, so a cap of avx512 keeps the AMX tiles off.
TEST(KernelMatmul, IsaNamesReadBack) {
  for (const Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni, Isa::Avx512Bf16, Isa::Amx}) {
    EXPECT_EQ(isa_from_name(isa_name(isa)), isa) << isa_name(isa);
  }
  EXPECT_EQ(isa_from_name("avx512"), Isa::Avx512Bf16);
  EXPECT_EQ(isa_from_name("amx"), Isa::Amx);
  EXPECT_FALSE(isa_from_name("amx512").has_value());
  EXPECT_EQ(kernel_isa(Isa::Amx), Isa::Avx512Vnni);
}

TEST(KernelMatmul, ActiveIsaFollowsCap) {
  const Isa before = active_isa();
  set_max_isa(Isa::Scalar);
  EXPECT_EQ(active_isa(), Isa::Scalar);
  set_max_isa(Isa::Amx);
  EXPECT_EQ(active_isa(), detected_isa());
  set_max_isa(before);
}

}  // namespace
}  // namespace tessera
