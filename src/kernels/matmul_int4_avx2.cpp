// AVX2 INT4 group-wise matmul: unsigned nibbles × per-token int8 activations (vpmaddubsw), int32 per group,
// fp32 per group scale; the zero points through per-group activation sums.
//
// 32 packed bytes are two chunks (64 values): AND gives the low nibbles (values 0-15 of both chunks), a shift
// and an AND the high ones (values 16-31). The activations are stored in that order (matmul_lowbit_kernels.h),
// so no shuffle is needed and one pair of vpmaddubsw covers 64 weights. Per row and token:
//   y = x_scale · (Σ_g s_g · Σ_{i∈g} q_i·xq_i − Σ_g s_g·z_g · Σ_{i∈g} xq_i)
// Integer bounds: a vpmaddubsw lane is at most 2·15·127 = 3810, a pair of them 7620, four pairs 30480: int16
// holds up to four pairs (256 values) before vpmaddwd widens to int32.
//
// Batch invariance: decode (one token, weights unpacked in registers) and batches (weights unpacked once per
// row into a buffer that every token tile reuses) run the same integer operations on the same bytes and the
// same fp32 operations in the same order for every output element, so y[t, o] does not depend on the batch,
// the tile shape or the row split.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/matmul_lowbit_kernels.h"

namespace tessera::kernels::lowbit::avx2 {
namespace {

#define UNROLL _Pragma("GCC unroll 16")
#define INLINE __attribute__((always_inline)) inline

constexpr int NT_BATCH = 4;  // tokens per batch tile

INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Chunks 2p and 2p+1 of a row as low / high nibble bytes; a lone last chunk (odd chunk count) is loaded with
// 16 bytes so that no read passes the row, its missing partner reading as zeros.
struct Nibbles {
  __m256i lo, hi;
};
INLINE Nibbles unpack_pair(const uint8_t* p, bool half) {
  const __m256i raw = half ? _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))
                           : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i mask = _mm256_set1_epi8(0x0F);
  return {_mm256_and_si256(raw, mask), _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask)};
}

// Σ of one pair's 64 products as 16 int16 lanes: lanes 0-7 chunk 2p, lanes 8-15 chunk 2p+1.
INLINE __m256i dot_pair(__m256i lo, __m256i hi, const int8_t* x) {
  return _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))),
                          _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 32))));
}

INLINE __m256 widen(__m256i sum16) { return _mm256_cvtepi32_ps(_mm256_madd_epi16(sum16, _mm256_set1_epi16(1))); }

// Group 32: the scales of a pair's two groups spread to match widen()'s lanes: [s_2p ×4, s_2p+1 ×4].
// K is a template argument so that the index vector is a constant, not built at run time every pair.
template <int K>
INLINE __m256 pair_scales(__m256 s8) {
  return _mm256_permutevar8x32_ps(s8, _mm256_setr_epi32(2 * K, 2 * K, 2 * K, 2 * K, 2 * K + 1, 2 * K + 1, 2 * K + 1,
                                                        2 * K + 1));
}
INLINE __m256 pair_scales(__m256 s8, int k) {
  switch (k) {
    case 0: return pair_scales<0>(s8);
    case 1: return pair_scales<1>(s8);
    case 2: return pair_scales<2>(s8);
    default: return pair_scales<3>(s8);
  }
}

// static_for<N>(f) calls f(std::integral_constant<int, i>{}) for i = 0..N-1, unrolled before optimization.
template <int N, typename F>
INLINE void static_for(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) __attribute__((always_inline)) {
    (f(std::integral_constant<int, I>{}), ...);
  }(std::make_integer_sequence<int, N>{});
}

// Eight fp16 values from p, of which only n (≤ 8) are read; the rest are zero.
INLINE __m256 load_halves(const uint16_t* p, int64_t n) {
  if (n >= 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  alignas(16) uint16_t tmp[8] = {};
  std::memcpy(tmp, p, size_t(n) * 2);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
}

// The zero-point term Σ_g s_g·z_g·sums_g, eight groups per FMA in increasing order and then the sum of the
// lanes, whether s·z comes from the fp16 parameters (decode) or from a row buffer (batches): the same fp32
// operations either way. Explicit instructions, so that the compiler cannot contract differently per caller.
INLINE __m256 zero_step(__m256 sz, const float* sums, __m256 acc) { return _mm256_fmadd_ps(sz, _mm256_loadu_ps(sums), acc); }
INLINE __m256 scaled_zeros8(const uint16_t* scales, const uint16_t* zeros, int64_t n) {
  return _mm256_mul_ps(load_halves(scales, n), load_halves(zeros, n));
}

struct Shape {
  int64_t n_chunks, n_pairs, n_full, ng, pairs_per_group;  // n_full: pairs of two chunks; pairs_per_group: 0 for 32
  explicit Shape(const LowbitArgs& a)
      : n_chunks((a.n_in + 31) / 32), n_pairs((n_chunks + 1) / 2), n_full(n_chunks / 2), ng(a.n_groups),
        pairs_per_group(a.group_size == 32 ? 0 : a.group_size / 64) {}
  bool half(int64_t p) const { return 2 * p + 1 == n_chunks; }
};

// Calls step.template operator()<false>(p) for full pairs in [pb, pe) and <true> for a lone last chunk.
template <typename Step>
INLINE void for_pairs(const Shape& s, int64_t pb, int64_t pe, Step&& step) {
  const int64_t full_end = pe < s.n_full ? pe : s.n_full;
  int64_t p = pb;
  for (; p < full_end; ++p) step.template operator()<false>(p);
  if (p < pe) step.template operator()<true>(p);
}

// Weights straight from the packed row (decode).
struct PackedRow {
  const uint8_t* w;
  const uint16_t* scales;
  int64_t ng;
  template <bool Half>
  INLINE Nibbles pair(int64_t p) const { return unpack_pair(w + 32 * p, Half); }
  INLINE __m256 scales8(int64_t g) const { return load_halves(scales + g, ng - g); }
  INLINE float scale(int64_t g) const { return _cvtsh_ss(scales[g]); }
};

// Weights unpacked once into a buffer: 64 bytes per pair (low nibbles, then high), scales and scale·zero as
// fp32.
struct UnpackedRow {
  const uint8_t* w;
  const float* scales;  // [ng rounded up to 8], zero padded
  const float* scaled_zeros;  // the same
  template <bool Half>
  INLINE Nibbles pair(int64_t p) const {
    return {_mm256_load_si256(reinterpret_cast<const __m256i*>(w + 64 * p)),
            _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 64 * p + 32))};
  }
  INLINE __m256 scales8(int64_t g) const { return _mm256_loadu_ps(scales + g); }
  INLINE float scale(int64_t g) const { return scales[g]; }
};

// The reduction of an NT tokens × NR rows tile, written once for both weight sources. Per element the fp32
// operations are the same whatever NT and NR: group 32, acc += widen(pair dot) · pair_scales per pair; larger
// groups, acc += float(int32 group sum) · s_g per group (integer sums are exact, so how they are grouped does
// not matter).
template <bool G32, int NT, int NR, typename Src>
INLINE void reduce(const Shape& s, const Src (&src)[NR], const int8_t* const (&x)[NT], __m256 (&acc)[NT][NR]) {
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  if constexpr (G32) {
    auto pair = [&]<bool Half>(int64_t p, const __m256 (&s8)[NR], auto k) __attribute__((always_inline)) {
      UNROLL
      for (int r = 0; r < NR; ++r) {
        const Nibbles w = src[r].template pair<Half>(p);
        __m256 sc;
        if constexpr (std::is_same_v<decltype(k), int>) {
          sc = pair_scales(s8[r], k);
        } else {
          sc = pair_scales<decltype(k)::value>(s8[r]);
        }
        UNROLL
        for (int t = 0; t < NT; ++t) acc[t][r] = _mm256_fmadd_ps(widen(dot_pair(w.lo, w.hi, x[t] + 64 * p)), sc, acc[t][r]);
      }
    };
    // Blocks of four full pairs (eight groups: one fp16 → fp32 conversion of their scales), then the rest.
    int64_t p0 = 0;
    for (; p0 + 4 <= s.n_full; p0 += 4) {
      __m256 s8[NR];
      UNROLL
      for (int r = 0; r < NR; ++r) s8[r] = src[r].scales8(2 * p0);
      static_for<4>([&](auto k) __attribute__((always_inline)) { pair.template operator()<false>(p0 + k, s8, k); });
    }
    if (p0 < s.n_pairs) {
      __m256 s8[NR];
      UNROLL
      for (int r = 0; r < NR; ++r) s8[r] = src[r].scales8(2 * p0);
      for_pairs(s, p0, s.n_pairs, [&]<bool Half>(int64_t p) __attribute__((always_inline)) {
        pair.template operator()<Half>(p, s8, int(p - p0));
      });
    }
  } else {
    for (int64_t g = 0; g < s.ng; ++g) {
      const int64_t pb = g * s.pairs_per_group;
      const int64_t pe = pb + s.pairs_per_group < s.n_pairs ? pb + s.pairs_per_group : s.n_pairs;
      __m256i sum32[NT][NR];
      UNROLL
      for (int t = 0; t < NT; ++t)
        UNROLL
        for (int r = 0; r < NR; ++r) sum32[t][r] = _mm256_setzero_si256();
      for_pairs(s, pb, pe, [&]<bool Half>(int64_t p) __attribute__((always_inline)) {
        UNROLL
        for (int r = 0; r < NR; ++r) {
          const Nibbles w = src[r].template pair<Half>(p);
          UNROLL
          for (int t = 0; t < NT; ++t)
            sum32[t][r] = _mm256_add_epi32(sum32[t][r], _mm256_madd_epi16(dot_pair(w.lo, w.hi, x[t] + 64 * p),
                                                                          _mm256_set1_epi16(1)));
        }
      });
      UNROLL
      for (int r = 0; r < NR; ++r) {
        const __m256 sc = _mm256_set1_ps(src[r].scale(g));
        UNROLL
        for (int t = 0; t < NT; ++t) acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum32[t][r]), sc, acc[t][r]);
      }
    }
  }
}

INLINE float finish(const LowbitArgs& a, __m256 acc, __m256 zero_acc, int64_t t) {
  return a.x_scale[t] * (hsum(acc) - hsum(zero_acc));
}

// Decode: each row is read once, so it is unpacked in registers; four rows at a time give four independent
// FMA chains (one row alone would wait on the FMA latency every pair).
template <bool G32, int NR>
INLINE void decode_tile(const LowbitArgs& a, const Shape& s, int64_t r0) {
  PackedRow src[NR];
  UNROLL
  for (int r = 0; r < NR; ++r) {
    const uint8_t* w = a.w + static_cast<size_t>(r0 + r) * a.row_bytes;
    src[r] = {w, a.group_scales + (r0 + r) * s.ng, s.ng};
    for (size_t off = 0; off < a.row_bytes; off += 64)
      _mm_prefetch(reinterpret_cast<const char*>(w + NR * a.row_bytes + off), _MM_HINT_T0);
  }
  const int8_t* const x[1] = {a.xq};
  __m256 acc[1][NR];
  reduce<G32, 1, NR>(s, src, x, acc);
  UNROLL
  for (int r = 0; r < NR; ++r) {
    __m256 z = _mm256_setzero_ps();
    const uint16_t* sc = a.group_scales + (r0 + r) * s.ng;
    const uint16_t* zp = a.group_zeros + (r0 + r) * s.ng;
    for (int64_t g = 0; g < s.ng; g += 8) z = zero_step(scaled_zeros8(sc + g, zp + g, s.ng - g), a.group_sums + g, z);
    a.y[r0 + r] = finish(a, acc[0][r], z, 0);
  }
}

template <bool G32>
void decode_rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  const Shape s(a);
  int64_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) decode_tile<G32, 4>(a, s, r);
  for (; r < row_end; ++r) decode_tile<G32, 1>(a, s, r);
}

// Batches: a block of rows unpacked once (2 bytes per weight, ~96 KiB: stays in L2), then every token tile
// passes over it, NT = 4 tokens sharing each weight load.
template <bool G32, int NT>
INLINE void token_tile(const LowbitArgs& a, const Shape& s, const UnpackedRow& row, int64_t t0, int64_t r,
                       int64_t stride) {
  const UnpackedRow src[1] = {row};
  const int8_t* x[NT];
  UNROLL
  for (int t = 0; t < NT; ++t) x[t] = a.xq + (t0 + t) * stride;
  __m256 acc[NT][1];
  reduce<G32, NT, 1>(s, src, x, acc);
  const int64_t sums_stride = int4_sums_stride(s.ng);
  UNROLL
  for (int t = 0; t < NT; ++t) {
    __m256 z = _mm256_setzero_ps();
    const float* sums = a.group_sums + (t0 + t) * sums_stride;
    for (int64_t g = 0; g < s.ng; g += 8) z = zero_step(_mm256_load_ps(row.scaled_zeros + g), sums + g, z);
    a.y[(t0 + t) * a.n_out + r] = finish(a, acc[t][0], z, t0 + t);
  }
}

template <bool G32>
void batch_rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  const Shape s(a);
  const int64_t stride = s.n_pairs * 64, ng8 = (s.ng + 7) / 8 * 8;
  int64_t block = 96 * 1024 / stride;
  block = block < 1 ? 1 : block > 64 ? 64 : block;
  thread_local std::vector<uint8_t> buf_storage;
  thread_local std::vector<float> param_storage;  // per row: ng8 scales, then ng8 scale·zero products
  const size_t need = static_cast<size_t>(block * stride) + 32;
  if (buf_storage.size() < need) buf_storage.resize(need);
  if (param_storage.size() < static_cast<size_t>(block * 2 * ng8 + 8)) param_storage.resize(static_cast<size_t>(block * 2 * ng8 + 8));
  uint8_t* buf = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf_storage.data()) + 31) & ~uintptr_t(31));
  float* params = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(param_storage.data()) + 31) & ~uintptr_t(31));
  for (int64_t rb = row_begin; rb < row_end; rb += block) {
    const int64_t re = rb + block < row_end ? rb + block : row_end;
    for (int64_t r = rb; r < re; ++r) {
      const uint8_t* w = a.w + static_cast<size_t>(r) * a.row_bytes;
      uint8_t* u = buf + (r - rb) * stride;
      for (int64_t p = 0; p < s.n_pairs; ++p) {
        const Nibbles n = unpack_pair(w + 32 * p, s.half(p));
        _mm256_store_si256(reinterpret_cast<__m256i*>(u + 64 * p), n.lo);
        _mm256_store_si256(reinterpret_cast<__m256i*>(u + 64 * p + 32), n.hi);
      }
      float* sc = params + (r - rb) * 2 * ng8;
      const uint16_t* scales = a.group_scales + r * s.ng;
      const uint16_t* zeros = a.group_zeros + r * s.ng;
      for (int64_t g = 0; g < ng8; g += 8) {
        _mm256_store_ps(sc + g, load_halves(scales + g, s.ng - g));
        _mm256_store_ps(sc + ng8 + g, scaled_zeros8(scales + g, zeros + g, s.ng - g));
      }
    }
    auto row = [&](int64_t r) {
      const float* sc = params + (r - rb) * 2 * ng8;
      return UnpackedRow{buf + (r - rb) * stride, sc, sc + ng8};
    };
    int64_t t = 0;
    for (; t + NT_BATCH <= a.n_tokens; t += NT_BATCH)
      for (int64_t r = rb; r < re; ++r) token_tile<G32, NT_BATCH>(a, s, row(r), t, r, stride);
    for (; t < a.n_tokens; ++t)
      for (int64_t r = rb; r < re; ++r) token_tile<G32, 1>(a, s, row(r), t, r, stride);
  }
}

// Activations: one symmetric scale per token (max|x| / 127, round to nearest even), written in the pair order
// above, with the per-group sums of the int8 values.
INLINE __m256i quantize8(const float* x, __m256 mul) { return _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), mul)); }

}  // namespace

void int4_quantize_acts(const float* x, int64_t n_in, int64_t group, int64_t t_begin, int64_t t_end, int8_t* q,
                        float* scale, float* group_sums) {
  const int64_t n_chunks = (n_in + 31) / 32, stride = int4_act_stride(n_in), ng = (n_in + group - 1) / group;
  const int64_t sums_stride = int4_sums_stride(ng);
  for (int64_t t = t_begin; t < t_end; ++t) {
    const float* xt = x + t * n_in;
    int8_t* qt = q + t * stride;
    __m256 vmax = _mm256_setzero_ps();
    int64_t i = 0;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= n_in; i += 8) vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, _mm256_loadu_ps(xt + i)));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    float amax = _mm_cvtss_f32(m);
    for (; i < n_in; ++i) amax = amax > __builtin_fabsf(xt[i]) ? amax : __builtin_fabsf(xt[i]);
    const float d = amax / 127.0f;
    const float inv = d > 0.0f ? 1.0f / d : 0.0f;
    const __m256 mul = _mm256_set1_ps(inv);
    std::memset(qt, 0, static_cast<size_t>(stride));
    float* sums = group_sums + t * sums_stride;
    for (int64_t g = 0; g < sums_stride; ++g) sums[g] = 0.0f;
    for (int64_t c = 0; c < n_chunks; ++c) {
      alignas(32) int8_t v[32] = {};
      int32_t total = 0;
      const int64_t begin = c * 32;
      if (begin + 32 <= n_in) {
        const __m256i i0 = quantize8(xt + begin, mul), i1 = quantize8(xt + begin + 8, mul);
        const __m256i i2 = quantize8(xt + begin + 16, mul), i3 = quantize8(xt + begin + 24, mul);
        const __m256i packed = _mm256_permutevar8x32_epi32(
            _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3)),
            _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_store_si256(reinterpret_cast<__m256i*>(v), packed);
        for (int k = 0; k < 32; ++k) total += v[k];
      } else {
        for (int64_t k = 0; begin + k < n_in; ++k) {
          v[k] = static_cast<int8_t>(_mm_cvtss_si32(_mm_set_ss(xt[begin + k] * inv)));
          total += v[k];
        }
      }
      const int64_t p = c / 2, h = c % 2;
      std::memcpy(qt + 64 * p + 16 * h, v, 16);
      std::memcpy(qt + 64 * p + 32 + 16 * h, v + 16, 16);
      sums[begin / group] += static_cast<float>(total);
    }
    scale[t] = d;
  }
}

void int4_rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  const bool g32 = a.group_size == 32;
  if (a.n_tokens == 1) {
    g32 ? decode_rows<true>(a, row_begin, row_end) : decode_rows<false>(a, row_begin, row_end);
  } else {
    g32 ? batch_rows<true>(a, row_begin, row_end) : batch_rows<false>(a, row_begin, row_end);
  }
}

}  // namespace tessera::kernels::lowbit::avx2
