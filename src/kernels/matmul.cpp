// matmul dispatch: picks the ISA kernels, quantizes activations into per-thread scratch, splits output rows
// across the pool. Work is split over rows only, never over the reduction, which keeps results batch-invariant.
#include "kernels/matmul.h"

#include <vector>

#include "core/check.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_lowbit.h"
#include "kernels/quant.h"

namespace tessera {
namespace {

using kernels::KernelType;

// Grown on demand and kept: steady-state calls allocate nothing. Owned by the calling thread; the workers of
// one call only read it.
struct ActScratch {
  std::vector<int8_t> q;
  std::vector<int8_t> q_abs;
  std::vector<float> scale;
  std::vector<float> block_sum;
  std::vector<int16_t> sum16;
};

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

bool kernel_type(TensorType type, KernelType* out) {
  switch (type) {
    case TensorType::F32: *out = KernelType::F32; return true;
    case TensorType::F16: *out = KernelType::F16; return true;
    case TensorType::BF16: *out = KernelType::BF16; return true;
    case TensorType::I8: *out = KernelType::I8; return true;
    case TensorType::Q8_0: *out = KernelType::Q8_0; return true;
    case TensorType::Q4_0: *out = KernelType::Q4_0; return true;
    case TensorType::Q4_K: *out = KernelType::Q4_K; return true;
    case TensorType::Q6_K: *out = KernelType::Q6_K; return true;
    default: return false;
  }
}

bool is_float_type(KernelType t) { return t == KernelType::F32 || t == KernelType::F16 || t == KernelType::BF16; }

}  // namespace

void matmul_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  if (is_lowbit_type(w.type)) return matmul_lowbit_reference(w, x, n_tokens, y, pool);  // FP8, INT4
  pool.parallel_for(w.n_out, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> row;
    float* r = grow(row, static_cast<size_t>(w.n_in));
    for (int64_t o = begin; o < end; ++o) {
      dequantize_row(w.type, w.row(o), r, w.n_in, w.row_scales ? w.row_scales[o] : 1.0f);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * w.n_in;
        float sum = 0.0f;
        for (int64_t i = 0; i < w.n_in; ++i) sum += r[i] * xt[i];
        y[t * w.n_out + o] = sum;
      }
    }
  });
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  matmul(w, x, n_tokens, y, pool, active_isa());
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, Isa isa) {
  if (n_tokens <= 0 || w.n_out <= 0) return;
  if (is_lowbit_type(w.type)) return matmul_lowbit(w, x, n_tokens, y, pool, isa);  // FP8, INT4
  const Isa level = kernel_isa(isa < detected_isa() ? isa : detected_isa());
  KernelType type;
  if (level == Isa::Scalar || !kernel_type(w.type, &type)) return matmul_reference(w, x, n_tokens, y, pool);
  TESSERA_CHECK(w.n_in % traits(w.type).block_elements == 0);
  TESSERA_CHECK(type != KernelType::I8 || w.row_scales != nullptr);

  const bool avx512 = level == Isa::Avx512Vnni;
  const kernels::MatmulRowsFn rows_fn = avx512 ? kernels::avx512::matmul_rows : kernels::avx2::matmul_rows;
  const kernels::QuantizeActsFn quant_fn = avx512 ? kernels::avx512::quantize_acts : kernels::avx2::quantize_acts;

  kernels::MatmulArgs args;
  args.type = type;
  args.n_in = w.n_in;
  args.n_out = w.n_out;
  args.w = w.data;
  args.row_bytes = w.row_bytes;
  args.row_scales = w.row_scales;
  args.x = x;
  args.n_tokens = n_tokens;
  args.y = y;

  if (!is_float_type(type)) {
    thread_local ActScratch scratch;
    const bool per_row = type == KernelType::I8;
    const size_t nt = static_cast<size_t>(n_tokens);
    const size_t nb = static_cast<size_t>(w.n_in / 32);
    int8_t* q = grow(scratch.q, nt * static_cast<size_t>(w.n_in));
    int8_t* q_abs = grow(scratch.q_abs, nt * static_cast<size_t>(w.n_in));
    float* scale = grow(scratch.scale, nt * (per_row ? 1 : nb));
    float* block_sum = grow(scratch.block_sum, nt * nb);
    int16_t* sum16 = grow(scratch.sum16, nt * nb * 2);
    // Quantizing is ~1% of the matmul's work; only large batches are worth a parallel region of their own.
    if (n_tokens * w.n_in >= (int64_t{1} << 16) && pool.size() > 1) {
      pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end) {
        quant_fn(x, w.n_in, begin, end, per_row, q, q_abs, scale, block_sum, sum16);
      });
    } else {
      quant_fn(x, w.n_in, 0, n_tokens, per_row, q, q_abs, scale, block_sum, sum16);
    }
    args.xq = kernels::QuantizedActs{q, q_abs, scale, block_sum, sum16};
  }
  pool.parallel_for(w.n_out, [&](int64_t begin, int64_t end) { rows_fn(args, begin, end); });
}

}  // namespace tessera
