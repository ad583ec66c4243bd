// Dispatch for the FP8 and INT4 matmuls: per-token int8 activations for INT4 in per-thread scratch, rows split
// across the pool (never the reduction, which keeps results batch-invariant).
#include "kernels/matmul_lowbit.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/lowbit.h"
#include "kernels/matmul_kernels.h"
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
  const WeightMatrix* ws[1] = {&w};
  float* ys[1] = {y};
  matmul_int4_shared(ws, ys, x, n_tokens, pool, isa);
}

void matmul_int4_shared(std::span<const WeightMatrix* const> ws, std::span<float* const> ys, const float* x,
                        int64_t n_tokens, ThreadPool& pool, Isa isa) {
  if (n_tokens <= 0 || ws.empty()) return;
  const WeightMatrix& w0 = *ws[0];
  const Isa level = kernel_isa(isa < detected_isa() ? isa : detected_isa());
  // Group sizes that are odd multiples of 32 above 32 (96, 160, ...) split a 64-value pair of chunks between two
  // groups; the kernels take pairs whole, so those (never written by tessera quantize) run the reference.
  if (level == Isa::Scalar || (w0.group_size != 32 && w0.group_size % 64 != 0)) {
    for (size_t j = 0; j < ws.size(); ++j) matmul_lowbit_reference(*ws[j], x, n_tokens, ys[j], pool);
    return;
  }
  thread_local Int4ActScratch scratch;
  const int64_t n_groups = w0.n_groups();
  const size_t nt = size_t(n_tokens), stride = size_t(kernels::lowbit::int4_act_stride(w0.n_in));
  int8_t* q = grow(scratch.q, nt * stride);
  float* scale = grow(scratch.scale, nt);
  float* sums = grow(scratch.group_sums, nt * size_t(kernels::lowbit::int4_sums_stride(n_groups)));
  auto quantize = [&](int64_t b, int64_t e) {
    kernels::lowbit::avx2::int4_quantize_acts(x, w0.n_in, w0.group_size, b, e, q, scale, sums);
  };
  if (n_tokens * w0.n_in >= (int64_t{1} << 16) && pool.size() > 1) {
    pool.parallel_for(n_tokens, quantize);
  } else {
    quantize(0, n_tokens);
  }
  const uint64_t acts_id = kernels::new_activations_id();
  // At most three matrices in practice (q, k, v); a fixed array keeps the call free of heap allocation.
  constexpr size_t kMax = 8;
  TESSERA_CHECK(ws.size() <= kMax && ys.size() == ws.size());
  kernels::lowbit::LowbitArgs args[kMax];
  int64_t first_row[kMax + 1] = {0};
  for (size_t j = 0; j < ws.size(); ++j) {
    const WeightMatrix& w = *ws[j];
    TESSERA_CHECK(w.type == TensorType::INT4 && w.n_in == w0.n_in && w.group_size == w0.group_size &&
                  is_valid_int4_group(w.group_size) && w.group_scales && w.group_zeros &&
                  w.row_bytes >= int4_row_bytes(w.n_in));
    kernels::lowbit::LowbitArgs& a = args[j];
    a.n_in = w.n_in;
    a.n_out = w.n_out;
    a.n_tokens = n_tokens;
    a.w = w.data;
    a.row_bytes = w.row_bytes;
    a.y = ys[j];
    a.group_size = w.group_size;
    a.n_groups = n_groups;
    a.group_scales = w.group_scales;
    a.group_zeros = w.group_zeros;
    a.xq = q;
    a.x_scale = scale;
    a.group_sums = sums;
    a.acts_id = acts_id;
    first_row[j + 1] = first_row[j] + std::max<int64_t>(w.n_out, 0);
  }
  // All matrices' rows end to end, shared out over the threads in chunks of whole 64-row blocks, about
  // kInt4ChunksPerShare per thread's share (ThreadPool::parallel_for_dynamic, as matmul_shared_input does; the
  // 512-bit tiles keep their token pairs per acts_id, so a thread packs them once for all its chunks): one
  // barrier for all of them. One token reads each weight once (bound by memory): the AVX2 decode path; batches
  // take 512-bit VNNI where present, same bits.
  const size_t n = ws.size();
  const auto rows = level >= Isa::Avx512Vnni && n_tokens > 1 ? kernels::lowbit::avx512::int4_batch_rows
                                                             : kernels::lowbit::avx2::int4_rows;
  constexpr int64_t kChunkRows = 64, kInt4ChunksPerShare = 16;
  const int64_t chunk = pool.dynamic_chunk(first_row[n], kInt4ChunksPerShare, kChunkRows);
  pool.parallel_for_dynamic(first_row[n], chunk, [&](int, int64_t begin, int64_t end) {
    for (size_t j = 0; j < n; ++j) {
      const int64_t lo = std::max(begin, first_row[j]), hi = std::min(end, first_row[j + 1]);
      if (lo < hi) rows(args[j], lo - first_row[j], hi - first_row[j]);
    }
  });
}

}  // namespace tessera
