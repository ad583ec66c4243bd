// AVX-512 VNNI INT4 group-wise matmul for batches (two tokens or more; one token runs the AVX2 decode path,
// which is bound by memory, not arithmetic).
//
// One zmm holds two tokens: the 32 packed bytes of a pair of chunks are broadcast to both 256-bit halves and
// unpacked there (AND for values 0-15, shift and AND for 16-31), and the activations of a token pair are packed
// once per call so that one load gives [token t | token t+1] for each half of the unpacked weights. vpdpbusd
// takes the unsigned nibbles times the signed int8 activations straight into int32 lanes: no vpmaddubsw, int16
// step or widening (AVX2 needs four instructions per 64 values and token, this two per 64 values and two tokens).
//
// Bits: a 256-bit half holds exactly the int32 lanes the AVX2 kernel forms for its token (lane k: products of
// bytes 4k..4k+3 of the low and the high nibbles; integer sums are exact however they are grouped), and then
// goes through the same fp32 operations in the same order: per pair (group 32) or per group, acc += float(lanes)
// · scales; at the end the AVX2 horizontal sum and zero-point term. So a token's result is bit-identical to the
// AVX2 kernel's, alone (decode) or in any batch, on any row split (the KernelLowbit batch-invariance tests run at
// avx512_vnni).
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() as the unused merge source of their unmasked forms, and
// -W(maybe-)uninitialized reports every inlined use of them (as in the other *_avx512.cpp kernel files).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/huge_pages.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_lowbit_kernels.h"
#include "kernels/static_for.h"

namespace tessera::kernels::lowbit::avx512 {
namespace {

#define INLINE TESSERA_INLINE inline
#define ALWAYS TESSERA_INLINE  // for lambdas

INLINE __m256 load_halves(const uint16_t* p, int64_t n) {
  if (n >= 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  alignas(16) uint16_t tmp[8] = {};
  std::memcpy(tmp, p, size_t(n) * 2);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
}

struct Shape {
  int64_t n_chunks, n_pairs, n_full, ng, pairs_per_group;
  explicit Shape(const LowbitArgs& a)
      : n_chunks((a.n_in + 31) / 32), n_pairs((n_chunks + 1) / 2), n_full(n_chunks / 2), ng(a.n_groups),
        pairs_per_group(a.group_size == 32 ? 0 : a.group_size / 64) {}
  bool half(int64_t p) const { return 2 * p + 1 == n_chunks; }
};

// A zero register by the zeroing idiom (vpxord of a register with itself, which the core resolves at rename, no
// execution unit), for a dpbusd chain's start: GCC copies one kept zero register instead (vmovdqa32, an ALU
// operation per chain).
INLINE __m512i zeroed() {
#ifdef TESSERA_AVX512_EMULATED  // no zmm registers there (tests/avx512_emulation)
  return _mm512_setzero_si512();
#else
  __m512i z;
  asm volatile("vpxord %0, %0, %0" : "=v"(z));
  return z;
#endif
}

struct Nibbles {
  __m512i lo, hi;
};

// A pair's packed bytes in both halves; a lone last chunk (16 bytes) reads no byte past the row, its missing
// partner's nibbles zero.
INLINE Nibbles unpack_pair(const uint8_t* p, bool half) {
  const __m256i raw = half ? _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))
                           : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m512i both = _mm512_broadcast_i64x4(raw);
  const __m512i mask = _mm512_set1_epi8(0x0F);
  return {_mm512_and_si512(both, mask), _mm512_and_si512(_mm512_srli_epi16(both, 4), mask)};
}

// n elements of a thread's scratch `storage`, from its first 64-byte boundary (aligned loads and stores).
template <typename T>
T* aligned_scratch(std::vector<T>& storage, size_t n) {
  constexpr size_t kPad = 64 / sizeof(T);
  if (storage.size() < n + kPad) storage.resize(n + kPad);
  return reinterpret_cast<T*>(align_up(reinterpret_cast<uintptr_t>(storage.data()), 64));
}

// Activations by token pair: for pair j (tokens 2j, 2j+1) and pair of chunks p, 128 bytes
// [2j values 0-15 of both chunks | 2j+1 the same | 2j values 16-31 | 2j+1 the same], taken from the shared
// layout's two 32-byte halves (matmul_lowbit_kernels.h). A missing last token reads as zeros.
// Kept per thread while LowbitArgs::acts_id stays the same (row chunks of one matrix, or q, k and v).
const int8_t* pack_token_pairs(const LowbitArgs& a, int64_t n_pairs) {
  thread_local std::vector<int8_t> storage;
  thread_local uint64_t packed_id = 0;
  const int64_t n_tp = (a.n_tokens + 1) / 2, stride = n_pairs * 64;
  int8_t* out = aligned_scratch(storage, size_t(n_tp * n_pairs * 128));
  if (still_packed_for(packed_id, a.acts_id)) return out;
  for (int64_t j = 0; j < n_tp; ++j) {
    const int8_t* x0 = a.xq + 2 * j * stride;
    const bool has_second = 2 * j + 1 < a.n_tokens;
    const int8_t* x1 = has_second ? x0 + stride : nullptr;
    int8_t* dst = out + j * n_pairs * 128;
    for (int64_t p = 0; p < n_pairs; ++p, dst += 128) {
      const __m256i lo0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0 + 64 * p));
      const __m256i hi0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0 + 64 * p + 32));
      const __m256i lo1 = x1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x1 + 64 * p)) : _mm256_setzero_si256();
      const __m256i hi1 = x1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x1 + 64 * p + 32)) : _mm256_setzero_si256();
      _mm512_store_si512(dst, _mm512_inserti64x4(_mm512_zextsi256_si512(lo0), lo1, 1));
      _mm512_store_si512(dst + 64, _mm512_inserti64x4(_mm512_zextsi256_si512(hi0), hi1, 1));
    }
  }
  return out;
}

// One tile: NR consecutive rows × NTP token pairs. acc[j][r] holds token 2j's eight fp32 lanes in its low half
// and token 2j+1's in its high half, each the AVX2 kernel's accumulator for that token and row.
template <int PPG, int NTP, int NR>
INLINE void reduce(const LowbitArgs& a, const Shape& s, int64_t r0, const int8_t* const (&x)[NTP],
                   __m512 (&acc)[NTP][NR]) {
  const uint8_t* w[NR];
  const uint16_t* scales[NR];
  static_for<NR>([&](auto r) ALWAYS {
    w[r] = a.w + size_t(r0 + r) * a.row_bytes;
    scales[r] = a.group_scales + (r0 + r) * s.ng;
  });
  static_for<NTP>([&](auto j) ALWAYS { static_for<NR>([&](auto r) ALWAYS { acc[j][r] = _mm512_setzero_ps(); }); });
  // The rows of the next tile (NR rows on) are requested a line at a time while this one computes.
  const size_t ahead = size_t(NR) * a.row_bytes;
  if constexpr (PPG == 0) {
    // Group 32: per pair, int32 lanes [g_2p ×4 | g_2p+1 ×4] per token, converted and multiplied by the two
    // groups' scales spread the same way (the AVX2 kernel's permute, widened to both halves).
    auto block = [&]<bool Full>(int64_t p0, int64_t pe) ALWAYS {
      __m512 sc8[NR];
      static_for<NR>([&](auto r) ALWAYS {
        sc8[r] = _mm512_zextps256_ps512(load_halves(scales[r] + 2 * p0, s.ng - 2 * p0));
      });
      static_for<4>([&](auto k) ALWAYS {
        const int64_t p = p0 + k;
        if (!Full && p >= pe) return;
        const __m512i spread = _mm512_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1,
                                                 2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1);
        static_for<NR>([&](auto r) ALWAYS {
          if ((p & 1) == 0) _mm_prefetch(reinterpret_cast<const char*>(w[r] + 32 * p + ahead), _MM_HINT_T0);
          const Nibbles n = unpack_pair(w[r] + 32 * p, !Full && s.half(p));
          const __m512 sc = _mm512_permutexvar_ps(spread, sc8[r]);
          static_for<NTP>([&](auto j) ALWAYS {
            const int8_t* xp = x[j] + 128 * p;
            __m512i sums = _mm512_dpbusd_epi32(zeroed(), n.lo, _mm512_load_si512(xp));
            sums = _mm512_dpbusd_epi32(sums, n.hi, _mm512_load_si512(xp + 64));
            acc[j][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), sc, acc[j][r]);
          });
        });
      });
    };
    int64_t p0 = 0;
    for (; p0 + 4 <= s.n_full; p0 += 4) block.template operator()<true>(p0, p0 + 4);
    if (p0 < s.n_pairs) block.template operator()<false>(p0, s.n_pairs);
  } else {
    // Longer groups: a group's int32 sums over its pairs, then acc += float(sums) · s_g.
    for (int64_t g = 0; g < s.ng; ++g) {
      const int64_t pb = g * s.pairs_per_group;
      const int64_t pe = pb + s.pairs_per_group < s.n_pairs ? pb + s.pairs_per_group : s.n_pairs;
      __m512i sums[NTP][NR];
      static_for<NTP>([&](auto j) ALWAYS { static_for<NR>([&](auto r) ALWAYS { sums[j][r] = _mm512_setzero_si512(); }); });
      auto step = [&](int64_t p, bool half) ALWAYS {
        static_for<NR>([&](auto r) ALWAYS {
          if ((p & 1) == 0) _mm_prefetch(reinterpret_cast<const char*>(w[r] + 32 * p + ahead), _MM_HINT_T0);
          const Nibbles n = unpack_pair(w[r] + 32 * p, half);
          static_for<NTP>([&](auto j) ALWAYS {
            const int8_t* xp = x[j] + 128 * p;
            sums[j][r] = _mm512_dpbusd_epi32(sums[j][r], n.lo, _mm512_load_si512(xp));
            sums[j][r] = _mm512_dpbusd_epi32(sums[j][r], n.hi, _mm512_load_si512(xp + 64));
          });
        });
      };
      if constexpr (PPG > 0 && PPG <= 4) {
        if (pe - pb == PPG && pe <= s.n_full) {
          static_for<PPG>([&](auto k) ALWAYS { step(pb + k, false); });
        } else {
          for (int64_t p = pb; p < pe; ++p) step(p, s.half(p));
        }
      } else {
        for (int64_t p = pb; p < pe; ++p) step(p, s.half(p));
      }
      static_for<NR>([&](auto r) ALWAYS {
        const __m512 sc = _mm512_set1_ps(_cvtsh_ss(scales[r][g]));
        static_for<NTP>([&](auto j) ALWAYS {
          acc[j][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[j][r]), sc, acc[j][r]);
        });
      });
    }
  }
}

// The horizontal sum of 8 lanes in hsum_ymm_inl.h's order (hsum, the AVX2 kernel's), three steps of which each
// adds the same two values as there, for several sums at once: a register holds two 8-lane sums (a token
// pair's), in its 256-bit halves. Step 1: both halves of x and of y to four lanes each (hsum's low + high 128 bits), as the 128-bit chunks
// [x low, x high, y low, y high].
INLINE __m512 hsum_halves(__m512 x, __m512 y) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
}
// Step 2 (hsum's movehl add) for the chunks of u and v: per chunk [u0 + u2, u1 + u3, v0 + v2, v1 + v3].
INLINE __m512 hsum_pairs(__m512 u, __m512 v) {
  return _mm512_add_ps(_mm512_shuffle_ps(u, v, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_ps(u, v, _MM_SHUFFLE(3, 2, 3, 2)));
}
// Step 3 (hsum's movehdup add) within each chunk: [w0 + w1, w2 + w3, w0 + w1, w2 + w3].
INLINE __m512 hsum_last(__m512 w) {
  return _mm512_add_ps(_mm512_shuffle_ps(w, w, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(w, w, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Each token pair's group sums, [token 2j's 8 | token 2j+1's 8] per 8 groups, so that one load serves a pair's
// zero-point FMA (a missing last token reads as zeros).
// Kept like pack_token_pairs'.
const float* pack_sum_pairs(const LowbitArgs& a, int64_t sums_stride) {
  thread_local std::vector<float> storage;
  thread_local uint64_t packed_id = 0;
  const int64_t n_tp = (a.n_tokens + 1) / 2;
  float* out = aligned_scratch(storage, size_t(n_tp * sums_stride * 2));
  if (still_packed_for(packed_id, a.acts_id)) return out;
  for (int64_t j = 0; j < n_tp; ++j) {
    const float* s0 = a.group_sums + 2 * j * sums_stride;
    const bool has_second = 2 * j + 1 < a.n_tokens;
    for (int64_t g = 0; g < sums_stride; g += 8) {
      float* dst = out + (j * sums_stride + g) * 2;
      _mm256_store_ps(dst, _mm256_loadu_ps(s0 + g));
      _mm256_store_ps(dst + 8, has_second ? _mm256_loadu_ps(s0 + sums_stride + g) : _mm256_setzero_ps());
    }
  }
  return out;
}

// y for rows [r0, r0 + NR) and token pairs [j0, j0 + NTP): per row and token x_scale · (hsum(lanes) − hsum(z)),
// z the zero-point term's 8 lanes (FMAs of the row block's scale·zero products and the token's group sums over
// the groups, 8 at a time), as the AVX2 batch tile computes them, with the same operations per lane and per sum.
// Here a register takes a token pair's z, and the horizontal sums of two rows' lanes and z for a token pair run
// together (hsum_*: 14 shuffles and adds for 8 sums): computed one token at a time, the sums and the zero-point
// FMAs were a third of this kernel's time at 16 tokens (perf, 5632x2048, 2 threads, Zen 5).
template <int PPG, int NTP, int NR>
INLINE void tile(const LowbitArgs& a, const Shape& s, const int8_t* packed, const float* sum_pairs, int64_t j0,
                 int64_t r0, const float* scaled_zeros, int64_t zeros_stride) {
  static_assert(NR == 1 || NR == 2);
  const int8_t* x[NTP];
  static_for<NTP>([&](auto j) ALWAYS { x[j] = packed + (j0 + j) * s.n_pairs * 128; });
  __m512 acc[NTP][NR];
  reduce<PPG, NTP, NR>(a, s, r0, x, acc);
  const int64_t sums_stride = int4_sums_stride(s.ng);
  // Lanes 0, 8, 4, 12 of the last step: rows r0, r0 + 1 of token 2j, then of token 2j + 1.
  const __m512i gather = _mm512_setr_epi32(0, 8, 4, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  static_for<NTP>([&](auto j) ALWAYS {
    const int64_t t = 2 * (j0 + j);
    const float* sums = sum_pairs + (j0 + j) * sums_stride * 2;
    __m512 z[NR];
    static_for<NR>([&](auto r) ALWAYS { z[r] = _mm512_setzero_ps(); });
    for (int64_t g = 0; g < s.ng; g += 8) {
      const __m512 gs = _mm512_load_ps(sums + 2 * g);
      static_for<NR>([&](auto r) ALWAYS {
        const __m512 sz = _mm512_broadcast_f32x8(_mm256_load_ps(scaled_zeros + r * zeros_stride + g));
        z[r] = _mm512_fmadd_ps(sz, gs, z[r]);
      });
    }
    // A single row goes through as both rows; its copy is not stored.
    const __m512 lanes = hsum_halves(acc[j][0], acc[j][NR - 1]), zeros = hsum_halves(z[0], z[NR - 1]);
    const __m512 totals = hsum_last(hsum_pairs(lanes, zeros));  // per chunk: [hsum(lanes), hsum(z), ...]
    const __m512 diff = _mm512_sub_ps(totals, _mm512_movehdup_ps(totals));
    const bool has_second = t + 1 < a.n_tokens;
    const float xs0 = a.x_scale[t], xs1 = has_second ? a.x_scale[t + 1] : 0.0f;
    const __m128 y = _mm_mul_ps(_mm512_castps512_ps128(_mm512_permutexvar_ps(gather, diff)),
                                _mm_setr_ps(xs0, xs0, xs1, xs1));
    float* y0 = a.y + t * a.n_out + r0;
    if constexpr (NR == 2) {
      _mm_storel_pi(reinterpret_cast<__m64*>(y0), y);
      if (has_second) _mm_storeh_pi(reinterpret_cast<__m64*>(y0 + a.n_out), y);
    } else {
      _mm_store_ss(y0, y);
      if (has_second) _mm_store_ss(y0 + a.n_out, _mm_movehl_ps(y, y));
    }
  });
}

template <int PPG, int NTP>
INLINE void row_span(const LowbitArgs& a, const Shape& s, const int8_t* packed, const float* sum_pairs, int64_t j0,
                     int64_t rb, int64_t re, const float* zeros_f, int64_t ng8) {
  int64_t r = rb;
  for (; r + 2 <= re; r += 2) tile<PPG, NTP, 2>(a, s, packed, sum_pairs, j0, r, zeros_f + (r - rb) * ng8, ng8);
  if (r < re) tile<PPG, NTP, 1>(a, s, packed, sum_pairs, j0, r, zeros_f + (r - rb) * ng8, ng8);
}

// Token pairs per tile: group 32 keeps one fp32 accumulator per tile element, longer groups an int32 sum too.
template <int PPG>
constexpr int kTilePairs = PPG == 0 ? 6 : 4;

template <int PPG>
void batch_rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  const Shape s(a);
  const int8_t* packed = pack_token_pairs(a, s.n_pairs);
  const int64_t ng8 = int4_sums_stride(s.ng), n_tp = (a.n_tokens + 1) / 2;
  const float* sum_pairs = pack_sum_pairs(a, ng8);
  // Rows in blocks that stay in L2 (~64 KiB of packed weights) while every token tile passes over them.
  int64_t block = 64 * 1024 / static_cast<int64_t>(a.row_bytes);
  block = block < 2 ? 2 : block > 64 ? 64 : block;
  thread_local std::vector<float> zero_storage;
  if (zero_storage.size() < size_t(block * ng8 + 16)) zero_storage.resize(size_t(block * ng8 + 16));
  float* zeros_f = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(zero_storage.data()) + 31) & ~uintptr_t(31));
  constexpr int NTP = kTilePairs<PPG>;
  for (int64_t rb = row_begin; rb < row_end; rb += block) {
    const int64_t re = rb + block < row_end ? rb + block : row_end;
    for (int64_t r = rb; r < re; ++r) {
      const uint16_t* scales = a.group_scales + r * s.ng;
      const uint16_t* zeros = a.group_zeros + r * s.ng;
      // The next block's scales and zeros, requested a block ahead: read only here, in a burst per block, they
      // missed cache (this loop was 6 % of the kernel's time at 16 tokens, perf).
      if (r + block < row_end) {
        for (int64_t i = 0; i < s.ng; i += 32) {
          _mm_prefetch(reinterpret_cast<const char*>(scales + block * s.ng + i), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(zeros + block * s.ng + i), _MM_HINT_T0);
        }
      }
      for (int64_t g = 0; g < ng8; g += 8)
        _mm256_store_ps(zeros_f + (r - rb) * ng8 + g,
                        _mm256_mul_ps(load_halves(scales + g, s.ng - g), load_halves(zeros + g, s.ng - g)));
    }
    for_each_tile<NTP>(0, n_tp, [&](auto nt, int64_t j) ALWAYS {
      row_span<PPG, decltype(nt)::value>(a, s, packed, sum_pairs, j, rb, re, zeros_f, ng8);
    });
  }
}

}  // namespace

void int4_batch_rows(const LowbitArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.group_size) {
    case 32: return batch_rows<0>(a, row_begin, row_end);
    case 64: return batch_rows<1>(a, row_begin, row_end);
    case 128: return batch_rows<2>(a, row_begin, row_end);
    default: return batch_rows<-1>(a, row_begin, row_end);
  }
}

}  // namespace tessera::kernels::lowbit::avx512
