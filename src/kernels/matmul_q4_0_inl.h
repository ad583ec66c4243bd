// Q4_0 tiles on 256-bit registers, for both x86 levels (matmul_q4_0_avx2.cpp, matmul_q4_0_avx512.cpp): rows
// through the 32-value block tile (matmul_block32_inl.h), Q4_0x8 (interleaved groups of 8 rows). Anonymous
// namespace, for the reason matmul_ymm_inl.h gives.
#pragma once

#include "kernels/matmul_block32_inl.h"
#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels {
namespace {

// Q4_0x8 (kernels/interleave.h), NG groups of 8 rows (1, or 2 from `group`) for NT tokens: each register holds 4
// values of all 8 rows, so the rows' sums stay in separate int32 lanes and every block ends with one conversion
// and one FMA for the 8 rows instead of one per row. Per block and token: vector Vj's low nibbles are values
// 4j..4j+3 and its high nibbles 16+4j..16+4j+3 of each row, multiplied (vpmaddubsw) with those 4 activation
// bytes broadcast; the eight products add up in int16 (each pair sum is at most 2·15·127, eight of them
// 30480 < 32767), and vpmaddwd by 1 leaves row l's Σ q·x in lane l. The nibbles' offset of 8 is exact integer
// arithmetic: 8·Σx from the two 16-value sums of the activations. With two groups each broadcast serves both
// groups' vectors. Every (group, token) element runs the same operations whatever NT and NG are (batch
// invariance).
// Whether a Q4_0x8 tile requests its blocks ahead (group_block). Decode's (one token, one group) does not: as for
// the K-quants' (matmul_kquant_inl.h's q4_kx8_requests_ahead), the hardware prefetchers keep up with one stream
// better. 1 token from memory, 2 threads, Zen 4, over F16x32's rate in the same run, in the host's faster minutes
// (F16x32 at 50-70 GB/s): 5632x2048 0.83-0.96 without against 0.67-0.85 with, 2048x5632 0.71-0.85 against
// 0.58-0.68, 2048x2048 0.78-0.82 against 0.59-0.77, 256x2048 0.55-0.57 against 0.48-0.50; in its slower minutes
// level (5632x2048 0.94-1.08 against 0.92-1.01); at the AVX2 level 0.99-1.16 against 0.82-1.05.
constexpr bool q4_0x8_requests_ahead(int sums) { return sums > 1; }

template <int NT, int NG = 1>
__attribute__((noinline, flatten)) void tile_q4_0x8(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 144;  // 8 fp16 scales + 4 × 32 nibble bytes
  const int64_t nb = a.n_in / 32;
  const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1), eights = _mm256_set1_epi16(8);
  const TileActs<NT> x(a, t0);
  __m256 acc[NG][NT];
  static_for<NG>([&](auto g) { static_for<NT>([&](auto t) { acc[g][t] = _mm256_setzero_ps(); }); });
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk[NG];
    static_for<NG>([&](auto g) {
      blk[g] = q4_0x8_requests_ahead(NT * NG) ? group_block(a, group + g, b, kBlockBytes)
                                               : group_block_unrequested(a, group + g, b, kBlockBytes);
    });
    __m256i s16[NG][NT];  // set by j = 0: starting from zero cost an add per element and block
    static_for<4>([&](auto j) {
      __m256i lo[NG], hi[NG];
      static_for<NG>([&](auto g) {
        const __m256i p = _mm256_loadu_si256((const __m256i*)(blk[g] + 16 + 32 * j));
        lo[g] = _mm256_and_si256(p, low4);
        hi[g] = _mm256_and_si256(_mm256_srli_epi16(p, 4), low4);
      });
      static_for<NT>([&](auto t) {
        const int8_t* xb = x.q[t] + b * 32;
        const __m256i xl = broadcast32(xb + 4 * j), xh = broadcast32(xb + 16 + 4 * j);
        static_for<NG>([&](auto g) {
          const __m256i plo = _mm256_maddubs_epi16(lo[g], xl), phi = _mm256_maddubs_epi16(hi[g], xh);
          if constexpr (j == 0) {
            s16[g][t] = _mm256_add_epi16(plo, phi);
          } else {
            s16[g][t] = _mm256_add_epi16(s16[g][t], plo);
            s16[g][t] = _mm256_add_epi16(s16[g][t], phi);
          }
          keep_in_register(s16[g][t]);
        });
      });
    });
    static_for<NG>([&](auto g) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)blk[g]));
      static_for<NT>([&](auto t) {
        const __m256i offset = _mm256_madd_epi16(broadcast32(x.sum16[t] + 2 * b), eights);
        const __m256i sum = _mm256_sub_epi32(_mm256_madd_epi16(s16[g][t], ones), offset);
        acc[g][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_broadcast_ss(x.scale[t] + b)),
                                    acc[g][t]);
      });
    });
  }
  static_for<NG>([&](auto g) {
    static_for<NT>([&](auto t) { _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + (group + g) * 8, acc[g][t]); });
  });
}

#ifdef TESSERA_YMM_VNNI
// Q4_0x8's one-token tile with VNNI: the same exact block sums as tile_q4_0x8<1> and the 512-bit tiles, and the
// same fp32 epilogue, so the same bits; the sums are int32 from the start: the nibbles' vpdpbusd with the
// activation bytes broadcast inside the instruction, the low and the high nibbles in two chains, the low one
// starting at −8·Σx. Decode on Zen 4 takes the 256-bit tiles (one weight stream a thread:
// matmul_q4_0_avx512.cpp), and there the int16 route (vpmaddubsw, int16 adds, vpmaddwd widening and the offset,
// about 49 instructions a block against 30 here) held a core to 34.5 GB/s of weights in L2, this tile 41 (512x2048,
// one thread). In a decode step after 32 positions (TinyLlama shape, 2 threads, steps alternated in one process)
// 0.962 [0.957, 0.967] of the time in the host's faster minutes, when the cores must take weights at about 30 GB/s
// each, and 0.98 in its slower ones.
__attribute__((noinline, flatten)) void tile_q4_0x8_vnni_one_token(const MatmulArgs& a, int64_t t0, int64_t group) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  one_token_scaled_blocks<144, 8>(a, t0, group, [&](const uint8_t* nibbles, const int8_t* x, __m256i lo) {
    __m256i hi = _mm256_setzero_si256();
    static_for<4>([&](auto j) {
      const __m256i p = _mm256_loadu_si256((const __m256i*)(nibbles + 32 * j));
      lo = dpbusd_broadcast_ymm(lo, _mm256_and_si256(p, low4), x + 4 * j);
      hi = dpbusd_broadcast_ymm(hi, _mm256_and_si256(_mm256_srli_epi16(p, 4), low4), x + 16 + 4 * j);
    });
    return _mm256_add_epi32(lo, hi);
  });
}
#endif

// Q4_0x8 for interleaved_rows: 4-token pair tiles (two groups), and tiles of up to 4 tokens one group at a time;
// with VNNI one token takes tile_q4_0x8_vnni_one_token.
template <typename Isa>
struct Q4_0x8Family {
  static constexpr bool kPairs = true;
  static constexpr bool kWide = false;
  template <int NT>
  static void tile(const MatmulArgs& a, int64_t t0, int64_t group) {
#ifdef TESSERA_YMM_VNNI
    if constexpr (NT == 1 && Isa::kVnni) {
      tile_q4_0x8_vnni_one_token(a, t0, group);
    } else
#endif
    {
      tile_q4_0x8<NT>(a, t0, group);
    }
  }
  template <int NT>
  static void pair_tile(const MatmulArgs& a, int64_t t0, int64_t group) { tile_q4_0x8<NT, 2>(a, t0, group); }
};

// Q4_0 or Q4_0x8 rows [row_begin, row_end) on 256-bit tiles.
template <typename Isa>
void q4_0_rows_ymm(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.type == KernelType::Q4_0x8) return interleaved_rows<Q4_0x8Family<Isa>>(a, row_begin, row_end);
  block32_rows<Isa, Q4_0Block>(a, row_begin, row_end);
}

}  // namespace
}  // namespace tessera::kernels
