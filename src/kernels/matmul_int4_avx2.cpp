// AVX2 INT4 group-wise matmul: unsigned nibbles × per-token int8 activations (vpmaddubsw), int32 per group,
// fp32 per group scale; the zero points through per-group activation sums.
//
// 32 packed bytes are two chunks (64 values): AND gives the low nibbles (values 0-15 of both chunks), a shift
// and an AND the high ones (values 16-31). The activations are stored in that order (matmul_lowbit_kernels.h),
// so no shuffle is needed and one pair of vpmaddubsw covers 64 weights. Per row and token:
//   y = x_scale · (Σ_g s_g · Σ_{i∈g} q_i·xq_i − Σ_g s_g·z_g · Σ_{i∈g} xq_i)
// Group 32 widens each pair's int16 dot to int32 lanes at once and scales them per pair (the lanes are summed
// at the end); longer groups add up to four pairs in int16 first. Integer bounds: a vpmaddubsw lane is at most
// 2·15·127 = 3810, a pair of them 7620, four pairs 30480: int16 holds up to four pairs (256 values).
//
// Batch invariance: decode (one token, one row at a time) and batches (four tokens sharing each row's
// weights) compute exact integer group sums and then the same fp32 operations in the same order for every
// output element, so y[t, o] does not depend on the batch, the tile shape or the row split.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/hsum_ymm_inl.h"
#include "kernels/matmul_lowbit_kernels.h"
#include "kernels/static_for.h"

namespace tessera::kernels::lowbit::avx2 {
namespace {

#define INLINE TESSERA_INLINE inline
#define ALWAYS TESSERA_INLINE  // for lambdas

constexpr int NT_BATCH = 4;  // tokens per batch tile

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

// One packed weight row: pairs unpacked in registers where they are used, a prefetch `ahead` bytes on.
struct PackedRow {
  const uint8_t* w;
  const uint16_t* scales;
  int64_t ng;
  size_t ahead;  // prefetch distance in bytes
  template <bool Half>
  INLINE Nibbles pair(int64_t p) const {
    if (!Half && (p & 1) == 0) _mm_prefetch(reinterpret_cast<const char*>(w + 32 * p + ahead), _MM_HINT_T0);
    return unpack_pair(w + 32 * p, Half);
  }
  INLINE __m256 scales8(int64_t g) const { return load_halves(scales + g, ng - g); }
  INLINE float scale(int64_t g) const { return _cvtsh_ss(scales[g]); }
};

// The reduction of an NT tokens × NR rows tile. Per element the fp32 operations are the same whatever NT and
// NR: group 32, acc += float(int32 lanes of one pair) · the pair's two group scales, pair after pair; larger
// groups, acc += float(int32 group sum) · s_g per group. Integer sums are exact, so how they are grouped does
// not matter.
template <int PPG, int NT, int NR, typename Src>
INLINE void reduce(const Shape& s, const Src (&src)[NR], const int8_t* const (&x)[NT], __m256 (&acc)[NT][NR]) {
  // static_for rather than loops: GCC keeps a tile's arrays in registers only when every index is a constant
  // from the start (see static_for.h).
  static_for<NT>([&](auto t) ALWAYS { static_for<NR>([&](auto r) ALWAYS { acc[t][r] = _mm256_setzero_ps(); }); });
  if constexpr (PPG == 0) {
    // Per pair: the int16 dot ([g_2p ×8 | g_2p+1 ×8]), vpmaddwd to int32 ([g_2p ×4 | g_2p+1 ×4]), one conversion
    // and one FMA with the two groups' scales spread the same way; the lanes are summed at the end. No
    // horizontal adds: they cost shuffle uops per token, and their partial vectors spilled in batch tiles. The
    // scales of four pairs come in one fp16 load, spread per pair with one permute shared by all tokens.
    const __m256i ones = _mm256_set1_epi16(1);
    // A block of four pairs; Full: all four present and none a lone last chunk (the loop's common case,
    // compiled without the checks).
    auto block = [&]<bool Full>(int64_t p0, int64_t pe) ALWAYS {
      __m256 sc8[NR];
      static_for<NR>([&](auto r) ALWAYS { sc8[r] = src[r].scales8(2 * p0); });
      static_for<4>([&](auto k) ALWAYS {
        const int64_t p = p0 + k;
        if (!Full && p >= pe) return;
        const __m256i spread = _mm256_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1);
        static_for<NR>([&](auto r) ALWAYS {
          const Nibbles w = Full || !s.half(p) ? src[r].template pair<false>(p) : src[r].template pair<true>(p);
          const __m256 sc = _mm256_permutevar8x32_ps(sc8[r], spread);
          static_for<NT>([&](auto t) ALWAYS {
            const __m256i sums = _mm256_madd_epi16(dot_pair(w.lo, w.hi, x[t] + 64 * p), ones);
            acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), sc, acc[t][r]);
          });
        });
      });
    };
    int64_t p0 = 0;
    for (; p0 + 4 <= s.n_full; p0 += 4) block.template operator()<true>(p0, p0 + 4);
    if (p0 < s.n_pairs) block.template operator()<false>(p0, s.n_pairs);
  } else {
    // int16 holds four pairs (256 values): a group of up to 256 values is one int16 sum, widened once; longer
    // groups add such sums in int32.
    for (int64_t g = 0; g < s.ng; ++g) {
      const int64_t pb = g * s.pairs_per_group;
      const int64_t pe = pb + s.pairs_per_group < s.n_pairs ? pb + s.pairs_per_group : s.n_pairs;
      __m256i sum32[NT][NR];
      static_for<NT>([&](auto t) ALWAYS { static_for<NR>([&](auto r) ALWAYS { sum32[t][r] = _mm256_setzero_si256(); }); });
      for (int64_t p4 = pb; p4 < pe; p4 += 4) {
        __m256i sum16[NT][NR];
        static_for<NT>([&](auto t) ALWAYS { static_for<NR>([&](auto r) ALWAYS { sum16[t][r] = _mm256_setzero_si256(); }); });
        auto step = [&]<bool Half>(int64_t p) ALWAYS {
          static_for<NR>([&](auto r) ALWAYS {
            const Nibbles w = src[r].template pair<Half>(p);
            static_for<NT>([&](auto t) ALWAYS {
              sum16[t][r] = _mm256_add_epi16(sum16[t][r], dot_pair(w.lo, w.hi, x[t] + 64 * p));
            });
          });
        };
        const int64_t p4e = p4 + 4 < pe ? p4 + 4 : pe;
        if constexpr (PPG > 0 && PPG <= 4) {
          // The group size known at compile time: a whole group's pairs unrolled.
          if (p4e - p4 == PPG && p4e <= s.n_full) {
            static_for<PPG>([&](auto k) ALWAYS { step.template operator()<false>(p4 + k); });
          } else {
            for_pairs(s, p4, p4e, step);
          }
        } else {
          for_pairs(s, p4, p4e, step);
        }
        static_for<NT>([&](auto t) ALWAYS {
          static_for<NR>([&](auto r) ALWAYS {
            const __m256i widened = _mm256_madd_epi16(sum16[t][r], _mm256_set1_epi16(1));
            // One int16 sum per group (PPG ≤ 4) needs no int32 accumulator: the compiler drops the zero add.
            sum32[t][r] = PPG > 0 && PPG <= 4 ? widened : _mm256_add_epi32(sum32[t][r], widened);
          });
        });
      }
      static_for<NR>([&](auto r) ALWAYS {
        const __m256 sc = _mm256_set1_ps(src[r].scale(g));
        static_for<NT>([&](auto t) ALWAYS { acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum32[t][r]), sc, acc[t][r]); });
      });
    }
  }
}

INLINE float finish(const LowbitArgs& a, __m256 acc, __m256 zero_acc, int64_t t) {
  return a.x_scale[t] * (hsum(acc) - hsum(zero_acc));
}

// Decode: each row is read once, so it is unpacked in registers. NR rows share the activation loads; NR = 1
// measured fastest (tessera bench tinyllama-1.1b INT4 g32 batch-1 decode: 64 % of the measured bandwidth with
// four rows, 2 rows 71-78 %, one row 79-82 %): one sequential stream per thread, which the hardware prefetcher
// follows, and no register spills; the dependent FMA chain of a lone row hides behind the unpacking.
template <int PPG, int NR>
INLINE void decode_tile(const LowbitArgs& a, const Shape& s, int64_t r0) {
  // The prefetch distance is one tile: the same offset NR rows on. Rows are contiguous, so asking a fixed
  // distance ahead within the row (as matmul_ymm_inl.h does) would mostly hit lines the next row of this tile
  // is already loading.
  PackedRow src[NR];
  static_for<NR>([&](auto r) ALWAYS {
    src[r] = {a.w + static_cast<size_t>(r0 + r) * a.row_bytes, a.group_scales + (r0 + r) * s.ng, s.ng,
              NR * a.row_bytes};
  });
  const int8_t* const x[1] = {a.xq};
  __m256 acc[1][NR];
  reduce<PPG, 1, NR>(s, src, x, acc);
  static_for<NR>([&](auto r) ALWAYS {
    __m256 z = _mm256_setzero_ps();
    const uint16_t* sc = a.group_scales + (r0 + r) * s.ng;
    const uint16_t* zp = a.group_zeros + (r0 + r) * s.ng;
    for (int64_t g = 0; g < s.ng; g += 8) z = zero_step(scaled_zeros8(sc + g, zp + g, s.ng - g), a.group_sums + g, z);
    a.y[r0 + r] = finish(a, acc[0][r], z, 0);
  });
}

template <int PPG>
void decode_rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  const Shape s(a);
  for (int64_t r = row_begin; r < row_end; ++r) decode_tile<PPG, 1>(a, s, r);
}

// Batches: rows in blocks that stay in L2 (~64 KiB of packed weights) while every token tile passes over them;
// in a tile, NT = 4 tokens share each weight load and its unpacking. (Unpacking a block into a byte buffer
// first measured no faster: it trades the AND/shift work for twice the loads, and costs a pass of its own.)
template <int PPG, int NT>
INLINE void token_tile(const LowbitArgs& a, const Shape& s, int64_t t0, int64_t r, const float* scaled_zeros) {
  const PackedRow src[1] = {{a.w + static_cast<size_t>(r) * a.row_bytes, a.group_scales + r * s.ng, s.ng, a.row_bytes}};
  const int64_t stride = s.n_pairs * 64, sums_stride = int4_sums_stride(s.ng);
  const int8_t* x[NT];
  static_for<NT>([&](auto t) ALWAYS { x[t] = a.xq + (t0 + t) * stride; });
  __m256 acc[NT][1];
  reduce<PPG, NT, 1>(s, src, x, acc);
  static_for<NT>([&](auto t) ALWAYS {
    __m256 z = _mm256_setzero_ps();
    const float* sums = a.group_sums + (t0 + t) * sums_stride;
    for (int64_t g = 0; g < s.ng; g += 8) z = zero_step(_mm256_load_ps(scaled_zeros + g), sums + g, z);
    a.y[(t0 + t) * a.n_out + r] = finish(a, acc[t][0], z, t0 + t);
  });
}

template <int PPG>
void batch_rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  const Shape s(a);
  const int64_t ng8 = int4_sums_stride(s.ng);
  int64_t block = 64 * 1024 / static_cast<int64_t>(a.row_bytes);
  block = block < 1 ? 1 : block > 64 ? 64 : block;
  thread_local std::vector<float> zero_storage;  // per row of the block: ng8 scale·zero products
  if (zero_storage.size() < static_cast<size_t>(block * ng8 + 8)) zero_storage.resize(static_cast<size_t>(block * ng8 + 8));
  float* zeros_f = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(zero_storage.data()) + 31) & ~uintptr_t(31));
  for (int64_t rb = row_begin; rb < row_end; rb += block) {
    const int64_t re = rb + block < row_end ? rb + block : row_end;
    for (int64_t r = rb; r < re; ++r) {
      const uint16_t* scales = a.group_scales + r * s.ng;
      const uint16_t* zeros = a.group_zeros + r * s.ng;
      for (int64_t g = 0; g < ng8; g += 8)
        _mm256_store_ps(zeros_f + (r - rb) * ng8 + g, scaled_zeros8(scales + g, zeros + g, s.ng - g));
    }
    int64_t t = 0;
    for (; t + NT_BATCH <= a.n_tokens; t += NT_BATCH)
      for (int64_t r = rb; r < re; ++r) token_tile<PPG, NT_BATCH>(a, s, t, r, zeros_f + (r - rb) * ng8);
    for (int64_t r = rb; r < re; ++r) {
      const float* z = zeros_f + (r - rb) * ng8;
      switch (a.n_tokens - t) {
        case 3: token_tile<PPG, 3>(a, s, t, r, z); break;
        case 2: token_tile<PPG, 2>(a, s, t, r, z); break;
        case 1: token_tile<PPG, 1>(a, s, t, r, z); break;
        default: break;
      }
    }
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
        const __m256i s4 = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
        __m128i s2 = _mm_add_epi32(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
        s2 = _mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0x4e));
        s2 = _mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xb1));
        total = _mm_cvtsi128_si32(s2);
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

namespace {

// PPG, pairs of chunks per group: 0 for group 32 (two groups per pair), 1 and 2 (groups 64 and 128) fixed at
// compile time, -1 for longer groups.
template <int PPG>
void rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  a.n_tokens == 1 ? decode_rows<PPG>(a, row_begin, row_end) : batch_rows<PPG>(a, row_begin, row_end);
}

}  // namespace

void int4_rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.group_size) {
    case 32: return rows<0>(a, row_begin, row_end);
    case 64: return rows<1>(a, row_begin, row_end);
    case 128: return rows<2>(a, row_begin, row_end);
    default: return rows<-1>(a, row_begin, row_end);
  }
}

}  // namespace tessera::kernels::lowbit::avx2
