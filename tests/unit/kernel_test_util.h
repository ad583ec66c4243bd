// Helpers shared by the kernel tests: ISA levels to run, random data, weight matrices of any type.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/tensor_type.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/weight_matrix.h"

namespace tessera::testing {

// Every kernel family: tests run those the CPU has and skip the rest with a message.
inline std::vector<Isa> kernel_isas() { return {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni, Isa::Amx}; }

#define TESSERA_SKIP_IF_UNSUPPORTED(isa)                                                               \
  do {                                                                                                 \
    if ((isa) > ::tessera::detected_isa())                                                             \
      GTEST_SKIP() << "this CPU has " << ::tessera::isa_name(::tessera::detected_isa()) << ", not "    \
                   << ::tessera::isa_name(isa);                                                        \
  } while (0)

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& f : v) f = dist(rng);
  return v;
}

// A weight matrix that owns its storage: random normal values quantized row by row.
struct OwnedWeights {
  std::vector<uint8_t> data;
  std::vector<float> row_scales;
  std::vector<float> dequantized;  // [n_out, n_in], what the reference computes with
  WeightMatrix view;
};

inline OwnedWeights make_weights(TensorType type, int64_t n_out, int64_t n_in, uint32_t seed) {
  OwnedWeights w;
  const std::vector<float> values = random_floats(static_cast<size_t>(n_out * n_in), seed, 0.5f);
  const size_t row_bytes = tensor_row_bytes(type, static_cast<uint64_t>(n_in));
  w.data.resize(row_bytes * static_cast<size_t>(n_out));
  w.row_scales.resize(static_cast<size_t>(n_out), 1.0f);
  w.dequantized.resize(values.size());
  for (int64_t r = 0; r < n_out; ++r) {
    quantize_row(type, values.data() + r * n_in, w.data.data() + r * row_bytes, n_in, &w.row_scales[r]);
    dequantize_row(type, w.data.data() + r * row_bytes, w.dequantized.data() + r * n_in, n_in, w.row_scales[r]);
  }
  w.view.type = type;
  w.view.n_out = n_out;
  w.view.n_in = n_in;
  w.view.data = w.data.data();
  w.view.row_bytes = row_bytes;
  w.view.row_scales = type == TensorType::I8 || type == TensorType::FP8_E4M3 ? w.row_scales.data() : nullptr;
  return w;
}

// An n_in that exercises each type's odd cases: an odd number of blocks, or a length with a vector tail.
inline int64_t odd_n_in(TensorType type) {
  switch (traits(type).block_elements) {
    case 1: return 357;
    case 32: return 32 * 11;
    default: return 256 * 3;
  }
}

inline bool quantizes_activations(TensorType type) {
  return type != TensorType::F32 && type != TensorType::F16 && type != TensorType::BF16;
}

// |y - y_ref| bound for one output: fp32 rounding of two n-term dot products (2·n·eps·Σ|w·x|), plus, when the
// kernel quantizes activations to int8, half a step of each activation block times the weights it meets (blocks
// of 32 values; 256 for Q4_K, one per super-block; the whole row for I8).
inline double error_bound(TensorType type, const float* w, const float* x, int64_t n) {
  constexpr double kEps = 1.0 / (1 << 23);
  double abs_dot = 0.0, quant = 0.0;
  for (int64_t i = 0; i < n; ++i) abs_dot += std::fabs(double(w[i]) * x[i]);
  if (quantizes_activations(type)) {
    const int64_t block = type == TensorType::I8 ? n : type == TensorType::Q4_K ? 256 : 32;
    for (int64_t b = 0; b < n; b += block) {
      double amax = 0.0, wsum = 0.0;
      for (int64_t i = b; i < b + block; ++i) {
        amax = std::max(amax, double(std::fabs(x[i])));
        wsum += std::fabs(w[i]);
      }
      quant += 0.5 * amax / 127.0 * wsum * 1.001;
    }
  }
  return 2.0 * double(n) * kEps * abs_dot + quant + 1e-6 * kEps;
}

inline std::vector<TensorType> matmul_types() {
  return {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q8_0,
          TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::I8};
}

// matmul_shared_input over `ws` gives, bit for bit, what one matmul per matrix gives (`what` names the case).
inline void expect_shared_input_equals_separate(const std::vector<const WeightMatrix*>& ws, const std::vector<float>& x,
                                                int64_t n_tokens, ThreadPool& pool, Isa isa, const std::string& what) {
  std::vector<std::vector<float>> shared(ws.size()), separate(ws.size());
  std::vector<MatmulTarget> targets;
  for (size_t j = 0; j < ws.size(); ++j) {
    shared[j].assign(static_cast<size_t>(n_tokens * ws[j]->n_out), -1.0f);
    separate[j].assign(shared[j].size(), -2.0f);
    targets.push_back({ws[j], shared[j].data()});
    matmul(*ws[j], x.data(), n_tokens, separate[j].data(), pool, isa);
  }
  matmul_shared_input(targets, x.data(), n_tokens, pool, isa);
  for (size_t j = 0; j < ws.size(); ++j) {
    ASSERT_EQ(0, std::memcmp(shared[j].data(), separate[j].data(), sizeof(float) * shared[j].size()))
        << "target " << j << " (" << tensor_type_name(ws[j]->type) << ") at " << isa_name(isa) << ", "
        << pool.size() << " threads, " << n_tokens << " tokens: " << what;
  }
}

// 16 tokens of random activations with a NaN, ±infinity and ±3e38 in five of them (n_in > 300): their int8
// bytes saturate where their sums wrap, which every path of a batch must read as the 1-token path does.
inline std::vector<float> non_finite_activations(int64_t n_in, uint32_t seed) {
  auto x = random_floats(size_t(16 * n_in), seed);
  x[size_t(1 * n_in + 5)] = std::numeric_limits<float>::quiet_NaN();
  x[size_t(4 * n_in + 300)] = std::numeric_limits<float>::infinity();
  x[size_t(7 * n_in + 40)] = -std::numeric_limits<float>::infinity();
  x[size_t(10 * n_in + 7)] = 3e38f;
  x[size_t(13 * n_in + 260)] = -3e38f;
  return x;
}

// y (tokens × n_out) has alone's bits, or NaN wherever alone has NaN (`what` names the case).
inline void expect_same_bits_or_both_nan(const std::vector<float>& y, const std::vector<float>& alone, int64_t n_out,
                                         const std::string& what) {
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_TRUE(std::memcmp(&y[i], &alone[i], sizeof(float)) == 0 || (std::isnan(y[i]) && std::isnan(alone[i])))
        << what << ", token " << i / size_t(n_out) << ", row " << i % size_t(n_out) << ": " << y[i]
        << " in the batch, " << alone[i] << " alone";
  }
}

}  // namespace tessera::testing
