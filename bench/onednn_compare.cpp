// Tessera's INT8 (I8) and F16/BF16 matmuls against oneDNN's matmul primitive at TinyLlama-1.1B's shapes, for
// issue 20's question whether oneDNN should serve those paths: speed (median GOP/s), batch invariance (is token
// t of an M-token product bit-identical to token t alone?) and, for the float paths, error against fp64.
//
// Both sides start from fp32 activations and end with fp32 outputs, so both pay their activation conversion:
// Tessera inside matmul() (per-token int8 quantization for I8; none for F16/BF16, which read fp32; rounding to bf16
// for "BF16 products", the default for BF16 weights: vdpbf16ps, or AMX-BF16 tiles at the amx level), oneDNN in
// this file, before the primitive (per-token int8 quantization with Tessera's arithmetic; fp32 → bf16 rounding),
// parallel over tokens on oneDNN's OpenMP threads. oneDNN's weights are reordered once, before timing, into the
// layout its primitive asks for (as a loader would); Tessera's are interleaved as the model loader does.
//
// INT8 on oneDNN: s8 activations (symmetric, one scale per token, as Tessera quantizes) × s8 weights, int32
// sums written out as int32, then a pass of our own (parallel over tokens, timed) that applies the scales as
// Tessera's kernel does: y = float(sum) · (weight scale · token scale). oneDNN 2.6 can fuse only scales that vary
// along N (output scales); the fused equivalent of a per-token scale, a binary multiply post-op with a [M, 1]
// operand, is accepted but for M > 1 makes it fall back from its JIT kernel (brg:avx512_core_vnni) to its
// reference one (ref_int8:any), hundreds of times slower. The pass costs one read and write of the output, and
// its order of operations makes oneDNN's result bit-identical to Tessera's when the integer sums agree.
//
// Run: onednn_compare [reps] [shapes...] (reps: at least and by default 30; shapes: q/o k/v gate/up down).
// TESSERA_BENCH_THREADS sets both sides' thread count (default 2: Tessera's pool and omp_set_num_threads; neither
// pins its threads). Time it under `chrt -f 50` on a shared machine. Every call reads its weights from memory:
// the matrices are copied until the copies span 96 MiB (3× the L3) and calls take the copies in turn, as a
// model's layers follow each other.
#include <immintrin.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cpu_features.h"
#include "core/huge_pages.h"
#include "core/tensor_type.h"
#include "core/thread_pool.h"
#include "kernels/interleave.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace tessera {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

constexpr size_t kRotateBytes = size_t{96} << 20;
// Tessera's threshold for quantizing activations in a parallel region (kernels/matmul.cpp); the oneDNN side's
// conversions use the same, so neither pays a region the other skips.
constexpr int64_t kParallelConvert = int64_t{1} << 16;

struct Shape {
  int64_t n_in, n_out;
  const char* name;
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median seconds of `reps` calls of fn(rep) after `warmup` untimed ones. Warm-up also lets the other library's
// idle threads (OpenMP's spin, the pool's spin) go to sleep before timing starts.
template <typename Fn>
double median_seconds(Fn&& fn, int reps, int warmup = 3) {
  for (int r = 0; r < warmup; ++r) fn(r);
  std::vector<double> t(size_t(reps), 0.0);
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    fn(warmup + r);
    t[size_t(r)] = now_s() - t0;
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[size_t(reps / 2)];
}

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

// Huge pages, as the loader gives streamed weights. Exits when out of memory.
Buffer allocate(size_t n) {
  uint8_t* p = allocate_for_streaming(n);
  if (p == nullptr) {
    std::fprintf(stderr, "out of memory\n");
    std::exit(1);
  }
  return Buffer(p);
}

size_t n_copies(size_t bytes) { return std::max<size_t>(2, kRotateBytes / bytes + 1); }

// One matrix of one storage type: its rows as quantize_row writes them (the source of oneDNN's copy), the exact
// values they stand for (for the fp64 reference), and Tessera's rotating copies in the model loader's layout.
struct TesseraWeights {
  TensorType type;
  int64_t n_in = 0, n_out = 0;
  std::vector<uint8_t> rows;       // [n_out, row_bytes], WeightLayout::Rows
  std::vector<float> row_scales;   // I8 only
  std::vector<double> dequantized; // [n_out, n_in]
  Buffer data;
  std::vector<WeightMatrix> views;  // one per copy
};

TesseraWeights make_weights(TensorType type, const Shape& s, const std::vector<float>& values,
                            bool bf16_products = false) {
  TesseraWeights w;
  w.type = type;
  w.n_in = s.n_in;
  w.n_out = s.n_out;
  const size_t row_bytes = tensor_row_bytes(type, uint64_t(s.n_in));
  const size_t bytes = row_bytes * size_t(s.n_out);
  w.rows.resize(bytes);
  w.row_scales.assign(size_t(s.n_out), 1.0f);
  w.dequantized.resize(size_t(s.n_out * s.n_in));
  std::vector<float> row(size_t(s.n_in));
  for (int64_t r = 0; r < s.n_out; ++r) {
    quantize_row(type, &values[size_t(r * s.n_in)], &w.rows[size_t(r) * row_bytes], s.n_in, &w.row_scales[size_t(r)]);
    dequantize_row(type, &w.rows[size_t(r) * row_bytes], row.data(), s.n_in, w.row_scales[size_t(r)]);
    for (int64_t i = 0; i < s.n_in; ++i) w.dequantized[size_t(r * s.n_in + i)] = row[size_t(i)];
  }
  const size_t copies = n_copies(bytes);
  w.data = allocate(bytes * copies);
  std::memcpy(w.data.get(), w.rows.data(), bytes);
  interleave_rows(type, w.data.get(), s.n_out, s.n_in);
  if (bf16_products) pair_bf16_panels(w.data.get(), s.n_out, s.n_in);  // as the loader stores them
  for (size_t c = 0; c < copies; ++c) {
    if (c > 0) std::memcpy(w.data.get() + c * bytes, w.data.get(), bytes);
    WeightMatrix m{type, s.n_out, s.n_in, w.data.get() + c * bytes, row_bytes,
                   type == TensorType::I8 ? w.row_scales.data() : nullptr};
    m.layout = interleaved_layout(type);
    m.bf16_products = bf16_products;
    w.views.push_back(m);
  }
  return w;
}

// ---- activation conversions for oneDNN (AVX-512 by attribute: this file is built for the baseline ISA) -------
// GCC 12 reports its own headers' _mm512_undefined_* placeholders as uninitialized when they are inlined into
// a function with a target attribute; the values are never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// Tessera's per-token int8 quantization (kernels/matmul_acts_inl.h, quantize_acts_impl): d = amax / 127,
// q = round-to-nearest-even(x / d), so both libraries multiply the same int8 values. n: a multiple of 16.
__attribute__((target("avx512f,avx512bw"))) void quantize_token(const float* x, int64_t n, int8_t* q, float* scale) {
  __m512 vmax = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  const float d = _mm512_reduce_max_ps(vmax) / 127.0f;
  const __m512 mul = _mm512_set1_ps(d >= 0x1p-126f ? 1.0f / d : 0.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), mul));
    _mm512_mask_cvtsepi32_storeu_epi8(q + i, 0xffff, v);
  }
  *scale = d;
}

// fp32 → bf16, round to nearest even (what vcvtneps2bf16 does for finite values). n: a multiple of 16.
__attribute__((target("avx512f,avx512bw"))) void to_bf16(const float* x, int64_t n, uint16_t* dst) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
  for (int64_t i = 0; i < n; i += 16) {
    __m512i b = _mm512_castps_si512(_mm512_loadu_ps(x + i));
    b = _mm512_add_epi32(b, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(b, 16), one)));
    _mm512_mask_cvtepi32_storeu_epi16(dst + i, 0xffff, _mm512_srli_epi32(b, 16));
  }
}

#pragma GCC diagnostic pop

// ---- oneDNN ---------------------------------------------------------------------------------------------------

enum class Path { Int8, Bf16 };

// One oneDNN matmul for M tokens: y[M, N] = x[M, K] · Wᵀ, with its activation conversion. The primitive is
// created for this M (oneDNN JIT-compiles per shape and caches primitives), its weights reordered into the
// layout it chose and copied `copies` times.
class OnednnMatmul {
 public:
  OnednnMatmul(Path path, const TesseraWeights& w, int64_t m, dnnl::engine& eng, size_t copies)
      : path_(path), m_(m), k_(w.n_in), n_(w.n_out), stream_(eng) {
    const Dt act = path == Path::Int8 ? Dt::s8 : Dt::bf16;
    const memory::desc src_md({m, k_}, act, Tag::ab);
    const memory::desc wei_any({k_, n_}, act, Tag::any);
    const memory::desc dst_md({m, n_}, path == Path::Int8 ? Dt::s32 : Dt::f32, Tag::ab);
    if (path == Path::Int8) row_scales_ = w.row_scales;
    const double t0 = now_s();
    pd_ = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_any, dst_md), eng);
    prim_ = dnnl::matmul(pd_);
    create_ms_ = (now_s() - t0) * 1e3;
    // Tessera's rows are [N, K] row-major: for oneDNN's [K, N] weights that is tag ba.
    memory plain({{k_, n_}, act, Tag::ba}, eng, const_cast<uint8_t*>(w.rows.data()));
    const memory::desc wei_md = pd_.weights_desc();
    const size_t bytes = wei_md.get_size();
    weights_ = allocate(bytes * copies);
    for (size_t c = 0; c < copies; ++c) weight_mems_.emplace_back(wei_md, eng, weights_.get() + c * bytes);
    dnnl::reorder(plain, weight_mems_[0]).execute(stream_, plain, weight_mems_[0]);
    stream_.wait();
    for (size_t c = 1; c < copies; ++c) std::memcpy(weights_.get() + c * bytes, weights_.get(), bytes);
    src_buf_.resize(size_t(m * k_) * (path == Path::Int8 ? 1 : 2));
    tok_scale_.resize(size_t(m));
    if (path == Path::Int8) sums_.resize(size_t(m * n_));
    src_ = memory(src_md, eng, src_buf_.data());
    dst_ = memory(dst_md, eng, nullptr);
    // The argument maps are built once: a map per call would be a heap allocation oneDNN's timing need not pay.
    for (const memory& wm : weight_mems_) {
      args_.push_back({{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, dst_}});
    }
  }

  // The implementation oneDNN chose, and what creating the primitive (its JIT compilation) cost: a server
  // would pay that once per distinct M unless oneDNN's primitive cache still holds it.
  std::string impl() const {
    char buf[64];
    std::snprintf(buf, sizeof buf, " (created in %.2f ms)", create_ms_);
    return pd_.impl_info_str() + std::string(buf);
  }

  // x: [M, K] fp32, y: [M, N] fp32, from weight copy `copy`.
  void run(const float* x, float* y, size_t copy) {
    const int64_t m = m_, k = k_;
    if (path_ == Path::Int8) {
      int8_t* q = reinterpret_cast<int8_t*>(src_buf_.data());
#pragma omp parallel for schedule(static) if (m * k >= kParallelConvert)
      for (int64_t t = 0; t < m; ++t) quantize_token(x + t * k, k, q + t * k, &tok_scale_[size_t(t)]);
    } else {
      uint16_t* b = reinterpret_cast<uint16_t*>(src_buf_.data());
#pragma omp parallel for schedule(static) if (m * k >= kParallelConvert)
      for (int64_t t = 0; t < m; ++t) to_bf16(x + t * k, k, b + t * k);
    }
    dst_.set_data_handle(path_ == Path::Int8 ? static_cast<void*>(sums_.data()) : static_cast<void*>(y));
    prim_.execute(stream_, args_[copy % args_.size()]);
    stream_.wait();
    if (path_ == Path::Int8) {
      const int64_t n = n_;
      const float* ws = row_scales_.data();
      const int32_t* sums = sums_.data();
#pragma omp parallel for schedule(static) if (m * n >= kParallelConvert)
      for (int64_t t = 0; t < m; ++t) {
        const float d = tok_scale_[size_t(t)];
        for (int64_t o = 0; o < n; ++o) y[t * n + o] = float(sums[t * n + o]) * (ws[o] * d);
      }
    }
  }

 private:
  Path path_;
  int64_t m_, k_, n_;
  double create_ms_ = 0.0;
  dnnl::stream stream_;
  dnnl::matmul::primitive_desc pd_;
  dnnl::matmul prim_;
  Buffer weights_;
  std::vector<memory> weight_mems_;
  std::vector<uint8_t> src_buf_;  // [M, K] s8 or bf16
  std::vector<float> tok_scale_;   // [M] the per-token scales (int8)
  std::vector<float> row_scales_;  // [N] the weights' per-row scales (int8)
  std::vector<int32_t> sums_;      // [M, N] oneDNN's int32 output (int8)
  memory src_, dst_;  // dst_'s handle is set per call (y, or sums_ for int8)
  std::vector<std::unordered_map<int, memory>> args_;  // per weight copy
};

// oneDNN for any M, one primitive per M as a server would keep them (oneDNN also caches primitives by shape);
// one copy of the weights each.
struct OnednnByM {
  Path path;
  const TesseraWeights* w;
  dnnl::engine* eng;
  std::vector<std::pair<int64_t, std::unique_ptr<OnednnMatmul>>> by_m;

  void operator()(int64_t m, const float* x, float* y) {
    auto it = std::find_if(by_m.begin(), by_m.end(), [&](const auto& e) { return e.first == m; });
    if (it == by_m.end()) {
      by_m.emplace_back(m, std::make_unique<OnednnMatmul>(path, *w, m, *eng, 1));
      it = by_m.end() - 1;
    }
    it->second->run(x, y, 0);
  }
};

// ---- checks ---------------------------------------------------------------------------------------------------

// max |y − ref| / max |ref| over tokens [0, m): the error normalised by the output's largest magnitude (an
// element-wise relative error is unbounded where a dot product cancels to near zero).
double normwise_error(const std::vector<double>& ref, const float* y, size_t n) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; ++i) {
    err = std::max(err, std::fabs(double(y[i]) - ref[i]));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return err / scale;
}

// The fp64 product of the weights' exact values with the fp32 activations, tokens [0, m).
std::vector<double> reference(const TesseraWeights& w, const float* x, int64_t m) {
  std::vector<double> ref(size_t(m * w.n_out));
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t o = 0; o < w.n_out; ++o) {
      double s = 0.0;
      const double* wr = &w.dequantized[size_t(o * w.n_in)];
      for (int64_t i = 0; i < w.n_in; ++i) s += wr[i] * double(x[t * w.n_in + i]);
      ref[size_t(t * w.n_out + o)] = s;
    }
  }
  return ref;
}

// Batch invariance: rows of the M-token product that differ (any bit) from the same token computed alone.
struct Invariance {
  int64_t m = 0, differing = 0;
  double max_rel = 0.0;  // max |batched − alone| / max |alone| over the differing rows' elements
};

Invariance count_differing(const float* batched, const float* alone, int64_t m, int64_t n) {
  Invariance r{m, 0, 0.0};
  double scale = 0.0, diff = 0.0;
  for (int64_t t = 0; t < m; ++t) {
    const float* a = alone + t * n;
    const float* b = batched + t * n;
    if (std::memcmp(a, b, sizeof(float) * size_t(n)) != 0) ++r.differing;
    for (int64_t o = 0; o < n; ++o) {
      scale = std::max(scale, std::fabs(double(a[o])));
      diff = std::max(diff, std::fabs(double(a[o]) - double(b[o])));
    }
  }
  r.max_rel = scale > 0 ? diff / scale : 0.0;
  return r;
}

std::string invariance_text(const std::vector<Invariance>& v) {
  std::string s;
  for (const Invariance& r : v) {
    char buf[96];
    if (r.differing == 0) {
      std::snprintf(buf, sizeof buf, " M=%lld: identical;", (long long)r.m);
    } else {
      std::snprintf(buf, sizeof buf, " M=%lld: %lld/%lld rows differ (max %.1e);", (long long)r.m,
                    (long long)r.differing, (long long)r.m, r.max_rel);
    }
    s += buf;
  }
  return s;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera;
  const int reps = argc > 1 ? std::max(20, std::atoi(argv[1])) : 30;  // at least 20, as issue 20 asks
  const char* threads_env = std::getenv("TESSERA_BENCH_THREADS");
  const int n_threads = threads_env != nullptr ? std::max(1, std::atoi(threads_env)) : 2;
  if (detected_isa() < Isa::Avx512Vnni) {
    std::fprintf(stderr, "onednn_compare needs AVX-512 VNNI (its conversions and the question it answers)\n");
    return 1;
  }
  ThreadPool pool(n_threads);
  omp_set_num_threads(n_threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  const dnnl_version_t* v = dnnl_version();
  std::printf("Tessera ISA %s, pool of %d threads; oneDNN %d.%d.%d (%s runtime), %d OpenMP threads; median of %d\n",
              std::string(isa_name(kernel_isa(active_isa()))).c_str(), pool.size(), v->major, v->minor, v->patch,
              v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other", omp_get_max_threads(), reps);

  const std::vector<Shape> shapes = {
      {2048, 2048, "q/o"}, {2048, 256, "k/v"}, {2048, 5632, "gate/up"}, {5632, 2048, "down"}};
  const std::vector<int64_t> ms = {1, 16, 64, 512};
  const int64_t m_max = ms.back();

  struct Row {
    std::string path, shape;
    int64_t m;
    double tessera, onednn;  // GOP/s
  };
  std::vector<Row> rows;
  std::vector<std::string> notes;
  // Further arguments pick shapes by name (q/o k/v gate/up down); none: all.
  std::vector<std::string> picked(argv + std::min(argc, 2), argv + argc);
  for (const Shape& s : shapes) {
    if (!picked.empty() && std::find(picked.begin(), picked.end(), s.name) == picked.end()) continue;
    std::mt19937 rng(uint32_t(s.n_in * 7 + s.n_out));
    std::normal_distribution<float> wdist(0.0f, 0.02f), xdist(0.0f, 1.0f);
    std::vector<float> values(size_t(s.n_out * s.n_in));
    for (float& x : values) x = wdist(rng);
    std::vector<float> x(size_t(m_max * s.n_in));
    for (float& e : x) e = xdist(rng);
    char shape_name[64];
    std::snprintf(shape_name, sizeof shape_name, "%s %lldx%lld", s.name, (long long)s.n_in, (long long)s.n_out);

    const TesseraWeights i8 = make_weights(TensorType::I8, s, values);
    const TesseraWeights f16 = make_weights(TensorType::F16, s, values);
    const TesseraWeights bf16 = make_weights(TensorType::BF16, s, values);
    const TesseraWeights bf16p = make_weights(TensorType::BF16, s, values, true);
    std::vector<float> y(size_t(m_max * s.n_out));

    for (const int64_t m : ms) {
      const double ops = 2.0 * double(m) * double(s.n_in) * double(s.n_out) * 1e-9;
      auto tessera_gops = [&](const TesseraWeights& w) {
        return ops / median_seconds(
                         [&](int r) { matmul(w.views[size_t(r) % w.views.size()], x.data(), m, y.data(), pool); },
                         reps);
      };
      auto onednn_gops = [&](Path path, const TesseraWeights& w) {
        OnednnMatmul mm(path, w, m, eng, n_copies(w.rows.size()));
        const std::string note = std::string(path == Path::Int8 ? "int8 " : "bf16 ") + shape_name + " M=" +
                                 std::to_string(m) + ": " + mm.impl();
        notes.push_back(note);
        return ops / median_seconds([&](int r) { mm.run(x.data(), y.data(), size_t(r)); }, reps);
      };
      const double t_i8 = tessera_gops(i8), o_i8 = onednn_gops(Path::Int8, i8);
      const double t_f16 = tessera_gops(f16), t_bf16 = tessera_gops(bf16), t_bf16p = tessera_gops(bf16p);
      const double o_bf16 = onednn_gops(Path::Bf16, bf16);
      rows.push_back({"int8: Tessera I8 vs oneDNN s8", shape_name, m, t_i8, o_i8});
      rows.push_back({"float: Tessera F16 vs oneDNN bf16", shape_name, m, t_f16, o_bf16});
      rows.push_back({"float: Tessera BF16 vs oneDNN bf16", shape_name, m, t_bf16, o_bf16});
      rows.push_back({"bf16: Tessera BF16 products vs oneDNN bf16", shape_name, m, t_bf16p, o_bf16});
      std::printf("%-8s %-16s M=%-4lld I8 %7.1f | s8 %7.1f | F16 %6.1f BF16 %6.1f BF16p %6.1f | bf16 %6.1f GOP/s\n",
                  "timed", shape_name, (long long)m, t_i8, o_i8, t_f16, t_bf16, t_bf16p, o_bf16);
      std::fflush(stdout);
    }

    // Batch invariance and error, one copy of the weights, untimed. Tokens alone first (M = 1), then batches.
    auto check = [&](const char* what, const TesseraWeights& w, auto&& run_m) {
      std::vector<float> alone(size_t(m_max * s.n_out)), batched(alone.size());
      for (int64_t t = 0; t < m_max; ++t) run_m(int64_t{1}, &x[size_t(t * s.n_in)], &alone[size_t(t * s.n_out)]);
      std::vector<Invariance> inv;
      for (const int64_t m : {16, 64, 512}) {
        run_m(m, x.data(), batched.data());
        inv.push_back(count_differing(batched.data(), alone.data(), m, s.n_out));
      }
      const int64_t m_err = 16;
      const std::vector<double> ref = reference(w, x.data(), m_err);
      std::printf("check    %-16s %-13s error vs fp64 %.2e; batch invariance:%s\n", shape_name, what,
                  normwise_error(ref, alone.data(), size_t(m_err * s.n_out)), invariance_text(inv).c_str());
      std::fflush(stdout);
      return alone;
    };
    auto tessera_run = [&](const TesseraWeights& w) {
      return [&](int64_t m, const float* xm, float* ym) { matmul(w.views[0], xm, m, ym, pool); };
    };
    auto onednn_run = [&](Path path, const TesseraWeights& w) { return OnednnByM{path, &w, &eng, {}}; };
    const std::vector<float> tessera_i8 = check("Tessera I8", i8, tessera_run(i8));
    const std::vector<float> onednn_s8 = check("oneDNN s8", i8, onednn_run(Path::Int8, i8));
    // Equal bits would let a server switch library by batch size and still keep batch invariance.
    const Invariance same = count_differing(onednn_s8.data(), tessera_i8.data(), m_max, s.n_out);
    std::printf("check    %-16s Tessera I8 and oneDNN s8, tokens alone: %s\n", shape_name,
                same.differing == 0 ? "bit-identical" : (std::to_string(same.differing) + " rows differ").c_str());
    check("Tessera F16", f16, tessera_run(f16));
    check("Tessera BF16", bf16, tessera_run(bf16));
    check("Tessera BF16p", bf16p, tessera_run(bf16p));
    check("oneDNN bf16", bf16, onednn_run(Path::Bf16, bf16));
  }

  std::printf("\n| path | shape (n_in x n_out) | M | Tessera GOP/s | oneDNN GOP/s | oneDNN / Tessera |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    std::printf("| %s | %s | %lld | %.1f | %.1f | %.2f |\n", r.path.c_str(), r.shape.c_str(), (long long)r.m,
                r.tessera, r.onednn, r.onednn / r.tessera);
  }
  std::printf("\noneDNN implementations:\n");
  for (const std::string& n : notes) std::printf("  %s\n", n.c_str());
  return 0;
}
