// Dispatch for the FP8 and INT4 matmuls: per-token int8 activations for INT4 in per-call scratch, rows split
// across the pool (never the reduction, which keeps results batch-invariant).
#include "kernels/matmul_lowbit.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/lowbit.h"
#include "kernels/matmul_lowbit_kernels.h"

namespace tessera {
namespace {

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

struct Int4ActScratch {
  std::vector<int8_t> q;
  std::vector<float> scale, group_sums;
};

// One symmetric scale per token (max|x| / 127), rounded to nearest even, padded with zeros to whole chunks.
void quantize_tokens(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, int64_t group, int8_t* q,
                     float* scale, float* group_sums) {
  const int64_t padded = int64_t(int4_row_bytes(n_in)) * 2, n_groups = int4_n_groups(n_in, group);
  for (int64_t t = t_begin; t < t_end; ++t) {
    const float* xt = x + t * n_in;
    int8_t* qt = q + t * padded;
    float amax = 0.0f;
    for (int64_t i = 0; i < n_in; ++i) amax = std::fmax(amax, std::fabs(xt[i]));
    const float d = amax / 127.0f;
    const float inv = d > 0.0f ? 1.0f / d : 0.0f;
    for (int64_t i = 0; i < n_in; ++i) qt[i] = static_cast<int8_t>(std::nearbyint(xt[i] * inv));
    for (int64_t i = n_in; i < padded; ++i) qt[i] = 0;
    scale[t] = d;
    for (int64_t g = 0; g < n_groups; ++g) {
      int32_t s = 0;
      for (int64_t i = g * group; i < std::min(n_in, (g + 1) * group); ++i) s += qt[i];
      group_sums[t * n_groups + g] = static_cast<float>(s);
    }
  }
}

}  // namespace

void matmul_lowbit_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  pool.parallel_for(w.n_out, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> row;
    float* r = grow(row, static_cast<size_t>(w.n_in));
    for (int64_t o = begin; o < end; ++o) {
      dequantize_weight_row(w, o, r);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * w.n_in;
        float sum = 0.0f;
        for (int64_t i = 0; i < w.n_in; ++i) sum += r[i] * xt[i];
        y[t * w.n_out + o] = sum;
      }
    }
  });
}

void matmul_lowbit(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, Isa isa) {
  if (n_tokens <= 0 || w.n_out <= 0) return;
  const Isa level = kernel_isa(isa < detected_isa() ? isa : detected_isa());
  if (level == Isa::Scalar) return matmul_lowbit_reference(w, x, n_tokens, y, pool);
  TESSERA_CHECK(is_lowbit_type(w.type));

  kernels::lowbit::LowbitArgs a;
  a.n_in = w.n_in;
  a.n_out = w.n_out;
  a.n_tokens = n_tokens;
  a.w = w.data;
  a.row_bytes = w.row_bytes;
  a.y = y;
  if (w.type == TensorType::FP8_E4M3) {
    TESSERA_CHECK(w.row_scales != nullptr && w.row_bytes >= size_t(w.n_in));
    a.row_scales = w.row_scales;
    a.x = x;
    pool.parallel_for(w.n_out, [&](int64_t b, int64_t e) { kernels::lowbit::avx2::fp8_rows(a, b, e); });
    return;
  }
  TESSERA_CHECK(is_valid_int4_group(w.group_size) && w.group_scales && w.group_zeros &&
                w.row_bytes >= int4_row_bytes(w.n_in));
  a.group_size = w.group_size;
  a.n_groups = w.n_groups();
  a.group_scales = w.group_scales;
  a.group_zeros = w.group_zeros;
  thread_local Int4ActScratch scratch;
  const size_t nt = size_t(n_tokens), padded = int4_row_bytes(w.n_in) * 2;
  int8_t* q = grow(scratch.q, nt * padded);
  float* scale = grow(scratch.scale, nt);
  float* sums = grow(scratch.group_sums, nt * size_t(a.n_groups));
  if (n_tokens * w.n_in >= (int64_t{1} << 16) && pool.size() > 1) {
    pool.parallel_for(n_tokens, [&](int64_t b, int64_t e) {
      quantize_tokens(x, w.n_in, b, e, w.group_size, q, scale, sums);
    });
  } else {
    quantize_tokens(x, w.n_in, 0, n_tokens, w.group_size, q, scale, sums);
  }
  a.xq = q;
  a.x_scale = scale;
  a.group_sums = sums;
  pool.parallel_for(w.n_out, [&](int64_t b, int64_t e) { kernels::lowbit::avx2::int4_rows(a, b, e); });
}

}  // namespace tessera
