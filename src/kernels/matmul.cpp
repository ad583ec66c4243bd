// matmul dispatch: picks the ISA kernels, quantizes activations into per-thread scratch, splits output rows
// across the pool. Work is split over rows only, never over the reduction, which keeps results batch-invariant.
#include "kernels/matmul.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "core/check.h"
#include "core/weight_types.h"
#include "kernels/bf16_tile_layout.h"
#include "kernels/int8_outliers.h"
#include "kernels/interleave.h"
#include "kernels/lowbit.h"
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
  std::vector<int16_t> sum16;
  std::vector<int16_t> sum32;
  std::vector<int32_t> row_sum;
  std::vector<float> masked, outlier_val;  // I8 with an outlier threshold
  std::vector<int32_t> outlier_count, outlier_col;
};

template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// The kernel type of w's weight type in w's layout, from the weight-type registry; false when there is none.
bool kernel_type(const WeightMatrix& w, KernelType* out) {
  const WeightTypeInfo* info = find_weight_type(w.type);
  if (info == nullptr) return false;
  const std::optional<KernelType> k = w.layout == WeightLayout::Panel32        ? info->panel_kernel
                                      : w.layout == WeightLayout::Interleaved8 ? info->interleaved_kernel
                                                                               : info->rows_kernel;
  if (!k) return false;
  *out = *k;
  return true;
}

bool is_float_type(KernelType t) {
  switch (t) {
    case KernelType::F32:
    case KernelType::F16:
    case KernelType::BF16:
    case KernelType::F32x32:
    case KernelType::F16x32:
    case KernelType::BF16x32:
    case KernelType::FP8x32: return true;
    default: return false;
  }
}

// The kernel of `type`'s family at the AVX2 or AVX-512 level (with AMX where `amx`): the one place a kernel type
// meets its ISA files.
kernels::MatmulRowsFn rows_kernel(KernelType type, bool avx512, bool amx) {
  switch (type) {
    case KernelType::F32:
    case KernelType::F16:
    case KernelType::BF16:
    case KernelType::F32x32:
    case KernelType::F16x32:
    case KernelType::BF16x32:
    case KernelType::FP8x32: return avx512 ? kernels::avx512::matmul_float_rows : kernels::avx2::matmul_float_rows;
    case KernelType::Q8_0:
    case KernelType::Q8_0x8: return avx512 ? kernels::avx512::matmul_q8_0_rows : kernels::avx2::matmul_q8_0_rows;
    case KernelType::Q4_0:
    case KernelType::Q4_0x8: return avx512 ? kernels::avx512::matmul_q4_0_rows : kernels::avx2::matmul_q4_0_rows;
    case KernelType::Q4_K:
    case KernelType::Q6_K:
    case KernelType::Q4_Kx8:
    case KernelType::Q6_Kx8: return avx512 ? kernels::avx512::matmul_kquant_rows : kernels::avx2::matmul_kquant_rows;
    case KernelType::I8:
    case KernelType::I8x8:
      if (amx) return kernels::amx::matmul_i8_rows;
      return avx512 ? kernels::avx512::matmul_i8_rows : kernels::avx2::matmul_i8_rows;
  }
  return nullptr;
}

// matmul_shared_input's chunks: whole columns of the 512-bit tiles (two registers of 16 rows), about this many
// per thread's share.
constexpr int64_t kZmmColumnRows = 32;
constexpr int64_t kChunksPerShare = 16;

// The rows a parallel split must keep together: an interleaved group or a panel.
int64_t row_unit(WeightLayout layout) {
  return layout == WeightLayout::Panel32 ? kPanelRows : layout == WeightLayout::Interleaved8 ? kInterleaveRows : 1;
}

}  // namespace

bool takes_amx_int8_tiles(const WeightMatrix& w, Isa isa) {
  return std::min(isa, detected_isa()) >= Isa::Amx && w.type == TensorType::I8 &&
         w.layout == WeightLayout::Interleaved8 && w.outlier_threshold == 0.0f &&
         w.n_in % kernels::amx::kStepValues == 0;
}

bool takes_amx_bf16_tiles(const WeightMatrix& w, Isa isa) {
  return std::min(isa, detected_isa()) >= Isa::Amx && w.type == TensorType::BF16 &&
         w.layout == WeightLayout::Panel32 && w.bf16_products;
}

void matmul_reference(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  if (is_lowbit_type(w.type)) return matmul_lowbit_reference(w, x, n_tokens, y, pool);  // FP8, INT4
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

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  matmul(w, x, n_tokens, y, pool, active_isa());
}

namespace {

// How a matrix wants its activations: fp32 as they are, int8 with one scale per token (I8), per block of 32
// (Q8_0, Q4_0, Q6_K) or per 256-value super-block (Q4_K), or rounded to bf16 (BF16 panels with bf16 products,
// where the CPU has AVX-512 BF16).
enum class ActKind { Float, PerRow, Block32, Block256, Bf16 };

// Whether w takes the bf16 products at `isa` (not capped to the kernel level: they need AVX-512 BF16).
bool takes_bf16_products(const WeightMatrix& w, KernelType type, Isa isa) {
  return type == KernelType::BF16x32 && w.bf16_products && isa >= Isa::Avx512Bf16;
}

ActKind act_kind(const WeightMatrix& w, KernelType type, Isa isa) {
  if (takes_bf16_products(w, type, isa)) return ActKind::Bf16;
  if (is_float_type(type)) return ActKind::Float;
  switch (type) {
    case KernelType::I8:
    case KernelType::I8x8: return ActKind::PerRow;
    case KernelType::Q4_K:
    case KernelType::Q4_Kx8: return ActKind::Block256;
    default: return ActKind::Block32;
  }
}

// Runs prepare(begin, end) over all tokens: the activations' quantization or rounding, ~1% of the matmul's work
// on one thread while the others wait, so from 8 tokens of 2048 values it is shared out. A 2048x2048 Q8_0x8
// product (weights in cache, 2 threads, Zen 4, µs, three alternations) took 121-131 against 131-138 at 8 tokens
// and 212-213 against 222-227 at 16 with it shared from there rather than from 32 tokens; at 2-4 tokens sharing
// measured level or slower (the region's start costs about what half the work saves).
constexpr int64_t kSharedPrepareValues = int64_t{1} << 14;
template <typename F>
void prepare_tokens(int64_t n_tokens, int64_t n_in, ThreadPool& pool, F&& prepare) {
  if (n_tokens > 1 && n_tokens * n_in >= kSharedPrepareValues && pool.size() > 1) {
    pool.parallel_for(n_tokens, prepare);
  } else {
    prepare(0, n_tokens);
  }
}

// x rounded to bf16 pairs (MatmulArgs::x_bf16) into this thread's scratch, in the layout of the AMX tiles
// (`amx_tiles`) or of the AVX-512 BF16 ones.
const uint32_t* round_shared_bf16(const float* x, int64_t n_in, int64_t n_tokens, bool amx_tiles, ThreadPool& pool) {
  thread_local std::vector<uint32_t> pairs;
  const size_t words = amx_tiles ? kernels::Bf16Tiles(n_in, n_tokens).words()
                                 : static_cast<size_t>(n_tokens * ((n_in + 1) / 2));
  // From a cache line's start: an AMX A tile (1 KiB) is then 16 lines, not 17, and threads rounding the tokens of
  // neighbouring rows share no line but where their rows do.
  constexpr size_t kLineWords = 64 / sizeof(uint32_t);
  void* start = grow(pairs, words + kLineWords - 1);
  size_t space = (words + kLineWords - 1) * sizeof(uint32_t);
  uint32_t* out = static_cast<uint32_t*>(std::align(64, words * sizeof(uint32_t), start, space));
  const auto round = amx_tiles ? kernels::avx512::round_to_bf16_tiles : kernels::avx512::round_to_bf16;
  prepare_tokens(n_tokens, n_in, pool, [&](int64_t begin, int64_t end) { round(x, n_in, n_tokens, begin, end, out); });
  return out;
}

// x in the float panel tiles' order at this kernel level (MatmulArgs::x_packed) into this thread's scratch.
const float* pack_shared_floats(const float* x, int64_t n_in, int64_t n_tokens, bool avx512, ThreadPool& pool) {
  thread_local std::vector<float> packed;
  float* out = grow(packed, static_cast<size_t>(n_tokens * n_in));
  const auto pack = avx512 ? kernels::avx512::pack_panel_acts : kernels::avx2::pack_panel_acts;
  prepare_tokens(n_tokens, n_in, pool, [&](int64_t begin, int64_t end) { pack(x, n_in, n_tokens, begin, end, out); });
  return out;
}

// Matrices that take the fast path: a kernel type at a vector ISA level; not INT4, nor FP8 in rows
// (matmul_lowbit). FP8 in panels is a float panel type with row scales.
bool has_fast_kernel(const WeightMatrix& w, Isa level, KernelType* type) {
  return (!is_lowbit_type(w.type) || w.layout == WeightLayout::Panel32) && level != Isa::Scalar && kernel_type(w, type);
}

// INT4 matrices with one row length and group size take their activations in one format: one quantization and
// one parallel region for all of them (matmul_int4_shared).
bool shares_int4_input(std::span<const MatmulTarget> targets) {
  for (const MatmulTarget& t : targets) {
    if (t.w->type != TensorType::INT4 || t.w->n_in != targets[0].w->n_in ||
        t.w->group_size != targets[0].w->group_size)
      return false;
  }
  return true;
}

bool is_quantized(ActKind kind) { return kind != ActKind::Float && kind != ActKind::Bf16; }

// One call's activation formats: one, or two quantized ones (a Q6_K value projection beside Q4_K q and k).
constexpr int kMaxActFormats = 2;

// Quantizes x once into this thread's scratch `slot` (< kMaxActFormats) for weights of `kind` (no-op for Float).
// I8 with an outlier threshold: the int8 part quantizes a copy of x without the outliers, which are listed per
// token (int8_outliers.h).
kernels::QuantizedActs quantize_shared(ActKind kind, int slot, const float* x, int64_t n_in, int64_t n_tokens,
                                       float outlier_threshold, kernels::QuantizeActsFn quant_fn, ThreadPool& pool) {
  if (!is_quantized(kind)) return {};
  thread_local ActScratch scratches[kMaxActFormats];
  ActScratch& scratch = scratches[slot];
  const kernels::ActBlocks blocks = kind == ActKind::PerRow    ? kernels::ActBlocks::PerRow
                                    : kind == ActKind::Block32 ? kernels::ActBlocks::Block32
                                                               : kernels::ActBlocks::Block256;
  const bool per_row = kind == ActKind::PerRow;
  const size_t nt = static_cast<size_t>(n_tokens);
  const size_t nb = static_cast<size_t>(n_in / 32);
  const size_t n_q = nt * static_cast<size_t>(n_in);
  int8_t* q = grow(scratch.q, n_q);
  int8_t* q_abs = blocks == kernels::ActBlocks::Block256 ? nullptr : grow(scratch.q_abs, n_q);
  const size_t scales_per_token = per_row ? 1 : blocks == kernels::ActBlocks::Block32 ? nb : nb / 8;
  float* scale = grow(scratch.scale, nt * scales_per_token);
  int16_t* sum16 = blocks == kernels::ActBlocks::Block32 ? grow(scratch.sum16, nt * nb * 2) : nullptr;
  int16_t* sum32 = blocks == kernels::ActBlocks::Block256 ? grow(scratch.sum32, nt * nb) : nullptr;
  int32_t* row_sum = per_row ? grow(scratch.row_sum, nt) : nullptr;
  const bool outliers = per_row && outlier_threshold > 0.0f;
  const size_t n_x = outliers ? n_q : 0;
  float* masked = outliers ? grow(scratch.masked, n_x) : nullptr;
  float* o_val = outliers ? grow(scratch.outlier_val, n_x) : nullptr;
  int32_t* o_col = outliers ? grow(scratch.outlier_col, n_x) : nullptr;
  int32_t* o_count = outliers ? grow(scratch.outlier_count, nt) : nullptr;
  auto prepare = [&](int64_t begin, int64_t end) {
    if (outliers) split_int8_outliers(x, n_in, begin, end, outlier_threshold, masked, o_count, o_col, o_val);
    quant_fn(outliers ? masked : x, n_in, begin, end, blocks, q, q_abs, scale, sum16, sum32, row_sum);
  };
  prepare_tokens(n_tokens, n_in, pool, prepare);
  const uint64_t id = kernels::new_activations_id();
  return kernels::QuantizedActs{q, q_abs, scale, sum16, sum32, row_sum, o_count, o_col, o_val, id};
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, Isa isa) {
  const MatmulTarget target{&w, y};
  matmul_shared_input({&target, 1}, x, n_tokens, pool, isa);
}

void matmul_shared_input(std::span<const MatmulTarget> targets, const float* x, int64_t n_tokens,
                         ThreadPool& pool) {
  matmul_shared_input(targets, x, n_tokens, pool, active_isa());
}

void matmul_shared_input(std::span<const MatmulTarget> targets, const float* x, int64_t n_tokens, ThreadPool& pool,
                         Isa isa) {
  if (n_tokens <= 0 || targets.empty()) return;
  const Isa capped = isa < detected_isa() ? isa : detected_isa();
  const Isa level = kernel_isa(capped);
  // One parallel region for all targets needs one kernel path and one activation format, or two quantized ones
  // (a Q6_K value projection beside Q4_K q and k), each quantized once (INT4 has its own); anything else (FP8,
  // the scalar level, float beside quantized types) runs the targets one by one.
  ActKind formats[kMaxActFormats] = {};
  int n_formats = 0;
  bool shared = true;
  int64_t unit = 1;
  for (const MatmulTarget& t : targets) {
    KernelType type{};
    shared = shared && has_fast_kernel(*t.w, level, &type) && t.w->n_in == targets[0].w->n_in &&
             t.w->outlier_threshold == targets[0].w->outlier_threshold;
    if (!shared) break;
    const ActKind kind = act_kind(*t.w, type, capped);
    if (std::find(formats, formats + n_formats, kind) == formats + n_formats) {
      shared = n_formats == 0 || (n_formats < kMaxActFormats && is_quantized(kind) && is_quantized(formats[0]));
      if (shared) formats[n_formats++] = kind;
    }
    unit = std::max(unit, row_unit(t.w->layout));
  }
  // The row split runs in units of the largest group or panel among the targets, which every target's rows must
  // allow (8 divides 32).
  for (const MatmulTarget& t : targets) shared = shared && t.w->n_out % unit == 0;
  if (!shared && targets.size() > 1 && shares_int4_input(targets)) {
    constexpr size_t kMax = 8;
    TESSERA_CHECK(targets.size() <= kMax);
    const WeightMatrix* ws[kMax];
    float* ys[kMax];
    for (size_t j = 0; j < targets.size(); ++j) ws[j] = targets[j].w, ys[j] = targets[j].y;
    return matmul_int4_shared({ws, targets.size()}, {ys, targets.size()}, x, n_tokens, pool, isa);
  }
  if (!shared) {
    if (targets.size() > 1) {
      for (const MatmulTarget& t : targets) matmul_shared_input({&t, 1}, x, n_tokens, pool, isa);
      return;
    }
    const WeightMatrix& w = *targets[0].w;
    if (w.n_out <= 0) return;
    if (is_lowbit_type(w.type) && w.layout == WeightLayout::Rows) {
      return matmul_lowbit(w, x, n_tokens, targets[0].y, pool, isa);  // FP8, INT4
    }
    return matmul_reference(w, x, n_tokens, targets[0].y, pool);  // scalar level or a type without kernels
  }

  const bool avx512 = level == Isa::Avx512Vnni;
  const kernels::QuantizeActsFn quant_fn = avx512 ? kernels::avx512::quantize_acts : kernels::avx2::quantize_acts;
  const int64_t n_in = targets[0].w->n_in;
  kernels::QuantizedActs xq[kMaxActFormats];
  for (int f = 0; f < n_formats; ++f) {
    xq[f] = quantize_shared(formats[f], f, x, n_in, n_tokens, targets[0].w->outlier_threshold, quant_fn, pool);
  }
  const ActKind kind = formats[0];  // the only one unless both are quantized
  // BF16 products take the AMX tiles at every token count where the level has them (matmul_bf16_amx.cpp).
  const bool bf16_tiles = kind == ActKind::Bf16 && takes_amx_bf16_tiles(*targets[0].w, capped);
  const uint32_t* x_bf16 = kind == ActKind::Bf16 ? round_shared_bf16(x, n_in, n_tokens, bf16_tiles, pool) : nullptr;
  bool float_panels = false;
  for (const MatmulTarget& t : targets) float_panels = float_panels || t.w->layout == WeightLayout::Panel32;
  const float* x_packed = kind == ActKind::Float && float_panels && n_tokens > kernels::kPanelDirectTokens
                              ? pack_shared_floats(x, n_in, n_tokens, avx512, pool)
                              : nullptr;

  // At most three targets in practice (q, k, v); a small fixed array keeps the call free of heap allocation.
  constexpr size_t kMaxTargets = 8;
  TESSERA_CHECK(targets.size() <= kMaxTargets);
  kernels::MatmulArgs args[kMaxTargets];
  kernels::MatmulRowsFn rows_fn[kMaxTargets];
  int64_t first_row[kMaxTargets + 1];
  first_row[0] = 0;
  for (size_t j = 0; j < targets.size(); ++j) {
    const WeightMatrix& w = *targets[j].w;
    KernelType type{};
    TESSERA_CHECK(kernel_type(w, &type));  // every target passed has_fast_kernel
    TESSERA_CHECK(w.n_in % traits(w.type).block_elements == 0);
    TESSERA_CHECK((type != KernelType::I8 && type != KernelType::I8x8 && type != KernelType::FP8x32) ||
                  w.row_scales != nullptr);
    rows_fn[j] = kind != ActKind::Bf16 ? rows_kernel(type, avx512, takes_amx_int8_tiles(w, capped))
                 : bf16_tiles          ? kernels::amx::matmul_bf16_products_rows
                                       : kernels::avx512::matmul_bf16_products_rows;
    kernels::MatmulArgs& a = args[j];
    a.type = type;
    a.n_in = n_in;
    a.n_out = w.n_out;
    a.w = w.data;
    a.row_bytes = w.row_bytes;
    a.row_scales = w.row_scales;
    a.x = x;
    a.x_bf16 = x_bf16;
    a.x_packed = x_packed;
    a.bf16_pairs = w.pair_order();
    a.xq = xq[std::find(formats, formats + n_formats, act_kind(w, type, capped)) - formats];
    a.n_tokens = n_tokens;
    a.y = targets[j].y;
    first_row[j + 1] = first_row[j] + std::max<int64_t>(w.n_out, 0);
  }
  // The targets' rows, end to end, shared out over the threads: one barrier for all of them, and no thread
  // idles at the end of a small matrix (k and v are an eighth of q in grouped-query models). Interleaved and
  // panel matrices are split at their groups or panels: then every target's rows are, and the split runs in
  // such units. Each thread starts on its own even share and takes chunks of the others' when done
  // (parallel_for_dynamic): about kChunksPerShare chunks per share, whole 512-bit tile columns (32 rows).
  const size_t n_targets = targets.size();
  const int64_t n_units = first_row[n_targets] / unit;
  const int64_t column_units = std::max<int64_t>(1, kZmmColumnRows / unit);
  const int64_t n_columns = (n_units + column_units - 1) / column_units;
  const int64_t chunk = pool.dynamic_chunk(n_columns, kChunksPerShare);
  pool.parallel_for_dynamic(n_columns, chunk, [&](int, int64_t column_begin, int64_t column_end) {
    const int64_t begin = column_begin * column_units * unit;
    const int64_t end = std::min(column_end * column_units, n_units) * unit;
    for (size_t j = 0; j < n_targets; ++j) {
      const int64_t lo = std::max(begin, first_row[j]), hi = std::min(end, first_row[j + 1]);
      if (lo < hi) rows_fn[j](args[j], lo - first_row[j], hi - first_row[j]);
    }
  });
}

}  // namespace tessera
