// AVX-512 VNNI K-quant matmul kernels: the 256-bit tiles of matmul_kquant_inl.h with dpbusd as the byte dot
// product, and 512-bit batch tiles for Q4_Kx8 and Q6_Kx8.
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdint>

#include "core/cpu_features.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_kquant_inl.h"
#include "kernels/matmul_ymm_inl.h"
#include "kernels/matmul_zmm_inl.h"
#include "kernels/static_for.h"

namespace tessera::kernels::avx512 {
namespace {

// Q4_K's unpacked scales for one tile column: per super-block sb and register z, at [sb·NZ + z], the 16 rows'
// Q4_Kx8Scales (the 256-bit tiles' q4_kx8_scales, in VNNI's form) side by side, unpacked once per column and
// token block for all of its token tiles, which had each unpacked them again per super-block.
struct Q4KZmmScales {
  __m512 d, dmin;
  __m512i sc[8];
  __m512i mn_pair[4];
};
struct Q4KColumnScales {
  const Q4KZmmScales* scales;
};

// YmmBytes' operations at 512 bits (two groups' vectors side by side), for q4_k_scale_bits and q6_kx8_decode4.
struct ZmmBytes {
  using V = __m512i;
  static V splat(char c) { return _mm512_set1_epi8(c); }
  static V splat32(int c) { return _mm512_set1_epi32(c); }
  static V and_(V a, V b) { return _mm512_and_si512(a, b); }
  static V or_(V a, V b) { return _mm512_or_si512(a, b); }
  template <int k>
  static V srli16(V a) { return _mm512_srli_epi16(a, k); }
  template <int k>
  static V srli32(V a) { return _mm512_srli_epi32(a, k); }
  template <int k>
  static V slli32(V a) { return _mm512_slli_epi32(a, k); }
};

// q4_kx8_scales for the two 8-row groups of a register at once (group 0's rows in lanes 0-7, group 1's in 8-15):
// every step is per 32-bit lane but the fp16 (d, dmin) split, which here truncates each lane's pair to its low
// and high halves. The same values as two q4_kx8_scales<false> joined, in half the instructions.
TESSERA_INLINE inline void q4_kx16_scales(const uint8_t* blk, size_t gs, Q4KZmmScales& o) {
  const __m512i pairs = load_group_pair(blk, gs), a = load_group_pair(blk + 32, gs), b = load_group_pair(blk + 64, gs),
                c = load_group_pair(blk + 96, gs);
  o.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(pairs));
  o.dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(pairs, 16)));
  q4_k_scale_bits<ZmmBytes, false>(a, b, c, o.sc, o.mn_pair);
}

template <int NZ>
Q4KColumnScales unpack_q4_k_column(const MatmulArgs& a, int64_t group) {
  thread_local std::vector<Q4KZmmScales> scales;
  const int64_t nsb = a.n_in / zmm_block_values<ZmmKind::Q4_K>();
  const size_t n = size_t(nsb) * NZ;
  if (scales.size() < n) scales.resize(n);
  const size_t gs = 8 * a.row_bytes;
  const uint8_t* wz[NZ];
  register_groups<NZ>(a, group, wz);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    static_for<NZ>([&](auto z) TESSERA_INLINE {
      q4_kx16_scales(wz[z] + sb * zmm_block_bytes<ZmmKind::Q4_K>(), gs, scales[size_t(sb) * NZ + z]);
    });
  }
  return {scales.data()};
}

// Q4_Kx8 (kernels/interleave.h) for 16·NZ rows and NT tokens: tile_q4_kx8's scheme with dpbusd. Per 32-value
// sub-block j, 8 vectors of nibbles (values 4u..4u+3 of the 16 rows) times those 4 activation bytes broadcast
// sum into int32 directly, and vpmulld by the rows' sc_j adds that to the super-block's sum (the AVX2 256-bit
// tile's int16 sum, vpmaddwd by sc_j, is the same integer); the mins' sum and the float step per super-block are
// q4_kx8_min_sum's and q4_k_finish's at 16 rows a vector, with the column's unpacked scales. With a float step
// per 32-value sub-block (one activation scale per sub-block, as before), 16- and 64-token products (2048x2048,
// one thread, in cache, Zen 5, µs, four alternations) took 244-287 and 893-1394 where one step per super-block
// takes 209-247 and 779-1040. (GCC keeps the super-block's NZ·NT sums on the stack beside the step's 2·NZ·NT: its
// sub-blocks one after the other, each with half the sums, measured the same.)
//
// Both K-quant tiles request the weight stream (prefetch_ahead) a share of a super-block at each step: Q6_K an
// eighth at each of its 8 steps of 32 values, Q4_K two eighths at each of its 4 steps of 64 (for Q4_K an eighth or
// a quarter per step measured alike, docs/performance.md). Requested a whole block at a time, each request was a
// burst of 36 lines per 16 rows (Q4_K; 54 for Q6_K): a 16-token Q6_Kx8 product from memory took 1.3-1.5x its time
// with the weights in L3 (Q4_Kx8 1.2-1.3x, Q4_0x8 1.15-1.25x), and even from L3 the spread requests are faster
// (Q6_Kx8 462-569 µs against 637-677). From memory (5632x2048 and 2048x5632, 2 threads, Zen 5, µs, four and three
// alternations against the bursts): Q6_Kx8 at 16 tokens 584-718 against 780-807 and 468-485 against 759-798, at 8
// 362-457 against 533-594; Q4_Kx8 at 16 483-556 against 548-642 and 433-447 against 495-520, at 8 299-341 against
// 337-392; `tessera bench` batch 16 (5 alternating pairs) Q6_K 161-244 tok/s against 133-181, Q4_K 174-283 against
// 126-201. Spreading Q8_0x8's, Q4_0x8's and I8x8's 32-value blocks over their 4-8 steps did not help them.
//
// Both loop over a super-block's steps at run time (Q4_K: 4 steps of 64 values, one load of the nibbles giving both
// sub-blocks; Q6_K: 8 of 32) where they were unrolled whole, 2,300-3,400 instructions a super-block (mostly
// vpdpbusd and its broadcasts): the gain fits a loop too long for the op cache, run at the decoders' rate, which
// this machine's lack of performance counters leaves unconfirmed. The 16-row tiles also take their activations as
// the dot product's broadcast memory operand (dpbusd_broadcast), one instruction instead of two. From memory
// (5632x2048, 2 threads, Zen 5, µs, four alternations against the unrolled tiles): Q6_Kx8 at 16 tokens 413-529
// against 586-684, at 8 268-338 against 363-423; Q4_Kx8 at 16 430-515 against 510-638, at 8 264-286 against 301-345
// (2048x5632, three: Q6_Kx8 at 16 472-492 against 523-670, Q4_Kx8 456-487 against 465-603). In the model (`tessera
// bench`, nine alternating pairs, on a host that swung widely) batch 16 was faster in 7 of 9 pairs for Q4_K
// (229-291 tok/s against 212-278) and in 5 of 9 for Q6_K (137-326 against 141-245).
template <int NZ, int NT>
__attribute__((noinline, flatten)) void tile_q4_kx8_zmm(const MatmulArgs& a, const PackedTile& x, int64_t t0,
                                                        int64_t group, const Ahead& ahead, const Q4KColumnScales& cs) {
  constexpr int kBlockBytes = zmm_block_bytes<ZmmKind::Q4_K>();
  const int64_t nsb = a.n_in / zmm_block_values<ZmmKind::Q4_K>();
  const size_t gs = 8 * a.row_bytes;
  const uint8_t* wz[NZ];
  register_groups<NZ>(a, group, wz);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  __m512 acc[NZ][NT];
  zero_tile(acc);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk[NZ];
    static_for<NZ>([&](auto z) TESSERA_INLINE { blk[z] = wz[z] + sb * kBlockBytes; });
    const Q4KZmmScales* sc = cs.scales + sb * NZ;
    __m512i qx[NZ][NT];  // Σ_j sc_j·Σq·x
    static_for<NZ>([&](auto z) TESSERA_INLINE {
      static_for<NT>([&](auto t) TESSERA_INLINE { qx[z][t] = _mm512_setzero_si512(); });
    });
#pragma GCC unroll 1
    for (int chunk = 0; chunk < 4; ++chunk) {  // sub-blocks 2·chunk (low nibbles) and 2·chunk + 1 (high)
      prefetch_ahead_part<NZ, kBlockBytes, 8>(ahead, sb, gs, 2 * chunk);
      prefetch_ahead_part<NZ, kBlockBytes, 8>(ahead, sb, gs, 2 * chunk + 1);
      const int64_t b0 = sb * 8 + 2 * chunk;
      const int32_t* xb[2] = {x.q + b0 * 8 * NT, x.q + (b0 + 1) * 8 * NT};
      __m512i s32[2][NZ][NT];
      static_for<2>([&](auto h) TESSERA_INLINE {
        static_for<NZ>([&](auto z) TESSERA_INLINE {
          static_for<NT>([&](auto t) TESSERA_INLINE { s32[h][z][t] = _mm512_setzero_si512(); });
        });
      });
      static_for<8>([&](auto u) TESSERA_INLINE {
        __m512i q[2][NZ];
        static_for<NZ>([&](auto z) TESSERA_INLINE {
          const __m512i p = load_group_pair(blk[z] + 128 + 32 * (8 * chunk + u), gs);
          q[0][z] = _mm512_and_si512(p, low4);
          q[1][z] = _mm512_and_si512(_mm512_srli_epi16(p, 4), low4);
        });
        static_for<2>([&](auto h) TESSERA_INLINE {
          static_for<NT>([&](auto t) TESSERA_INLINE {
            const int32_t* xt = &xb[h][u * NT + t];
            if constexpr (NZ == 1) {
              s32[h][0][t] = dpbusd_broadcast(s32[h][0][t], q[h][0], xt);
            } else {
              const __m512i xv = _mm512_set1_epi32(*xt);
              static_for<NZ>([&](auto z) TESSERA_INLINE {
                s32[h][z][t] = _mm512_dpbusd_epi32(s32[h][z][t], q[h][z], xv);
              });
            }
            static_for<NZ>([&](auto z) TESSERA_INLINE { keep_in_zmm(s32[h][z][t]); });
          });
        });
      });
      static_for<2>([&](auto h) TESSERA_INLINE {
        static_for<NZ>([&](auto z) TESSERA_INLINE {
          const __m512i scale = sc[z].sc[2 * chunk + h];
          static_for<NT>([&](auto t) TESSERA_INLINE {
            qx[z][t] = _mm512_add_epi32(qx[z][t], _mm512_mullo_epi32(s32[h][z][t], scale));
          });
        });
      });
    }
    // q4_kx8_min_sum and q4_k_finish at 16 rows a vector: the same operations per lane.
    static_for<NT>([&](auto t) TESSERA_INLINE {
      const int32_t* sums = x.start + 4 * sb * NT + t;
      const __m512 dx = _mm512_set1_ps(x.scale[sb * NT + t]);
      static_for<NZ>([&](auto z) TESSERA_INLINE {
        __m512i mins = _mm512_madd_epi16(sc[z].mn_pair[0], _mm512_set1_epi32(sums[0]));
        static_for<3>([&](auto i) TESSERA_INLINE {
          constexpr int k = decltype(i)::value + 1;
          mins = _mm512_add_epi32(mins, _mm512_madd_epi16(sc[z].mn_pair[k], _mm512_set1_epi32(sums[k * NT])));
        });
        acc[z][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(qx[z][t]), _mm512_mul_ps(sc[z].d, dx), acc[z][t]);
        acc[z][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(sc[z].dmin, dx), acc[z][t]);
      });
    });
  }
  store_tile<NZ, NT>(a, acc, t0, group);
}

// Q6_Kx8 (kernels/interleave.h) for 16·NZ rows and NT tokens. Per 16-value sub-block k, four dpbusd (values
// q in [0, 63] unsigned, the token's 4 activation bytes broadcast) sum its 16 products per row into int32,
// starting from −32·Σx over the sub-block (the −32 offset, packed once per token: PackedTile), and one vpmulld by
// the row's sc_k adds it to the block's sum: 6 instructions where tile_q6_kx8's int16 route (two vpmaddubsw, an
// int16 add, vpmaddwd by the scale pair, an int32 add per 8 values) takes 10. The sums are the same exact
// integers, and the float steps are tile_q6_kx8's (q6_kx8_block_step per block, q6_kx8_finish per super-block):
// the same bits as the 256-bit tiles.
// On Zen 4 vpmulld, vpmaddwd, vmulps and FMAs issue on the two pipes that vpdpbusd takes: one of them per four
// vpdpbusd slows a stream of vpdpbusd by 1.25x, while adds, logic, shifts and conversions come free
// (bench/vnni_mix_bench.cpp). Per block and token this tile takes 8 vpdpbusd, 2 vpmulld and an FMA; it also took
// a vpmaddwd (the offset, now packed into each dot product's start) and a vmulps (d·dx, now one FMA by d per
// super-block).
template <int NZ, int NT>
__attribute__((noinline, flatten)) void tile_q6_kx8_zmm(const MatmulArgs& a, const PackedTile& x, int64_t t0,
                                                        int64_t group, const Ahead& ahead) {
  constexpr int kBlockBytes = zmm_block_bytes<ZmmKind::Q6_K>();
  const int64_t nsb = a.n_in / zmm_block_values<ZmmKind::Q6_K>();
  const size_t gs = 8 * a.row_bytes;
  const uint8_t* wz[NZ];
  register_groups<NZ>(a, group, wz);
  __m512 acc[NZ][NT];
  zero_tile(acc);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk[NZ];
    static_for<NZ>([&](auto z) TESSERA_INLINE { blk[z] = wz[z] + sb * kBlockBytes; });
    __m512 d[NZ];
    alignas(64) __m512i sc32[NZ][16];
    static_for<NZ>([&](auto z) TESSERA_INLINE {
      const uint8_t* gz = blk[z];
      d[z] = load_group_pair_scales(gz, gs);
      const uint8_t* scales = gz + 16 + 48 * 32;  // after the 8 fp16 d and 48 packed value vectors
      static_for<4>([&](auto k) TESSERA_INLINE {
        // Byte 4l + i of v: row l's scale of sub-block 4k + i, sign-extended into lane l.
        const __m512i v = load_group_pair(scales + 32 * k, gs);
        static_for<4>([&](auto i) TESSERA_INLINE {
          sc32[z][4 * k + i] = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * i), 24);
        });
      });
    });
    __m512 sb_sum[NZ][NT];  // Σ_b dx_b·Σ_k sc_k·Σ(q − 32)·x, before the rows' d
    zero_tile(sb_sum);
#pragma GCC unroll 1
    for (int b = 0; b < 8; ++b) {  // 32 values: sub-blocks 2b and 2b + 1
      prefetch_ahead_part<NZ, kBlockBytes, 8>(ahead, sb, gs, b);
      const int64_t blk32 = sb * 8 + b;
      const int32_t* xb = x.q + blk32 * 8 * NT;
      __m512i s32[NZ][NT];  // Σ_k sc_k·Σ(q − 32)·x over the block
      static_for<NZ>([&](auto z) TESSERA_INLINE {
        static_for<NT>([&](auto t) TESSERA_INLINE { s32[z][t] = _mm512_setzero_si512(); });
      });
      static_for<2>([&](auto half) TESSERA_INLINE {  // sub-block k = 2b + half: value vectors 4k..4k + 3
        constexpr int h = decltype(half)::value;
        const int k = 2 * b + h;
        __m512i q[NZ][4];
        static_for<NZ>([&](auto z) TESSERA_INLINE {
          const uint8_t* p = blk[z] + 16 + 3 * 32 * k;
          const __m512i packed[3] = {load_group_pair(p, gs), load_group_pair(p + 32, gs), load_group_pair(p + 64, gs)};
          q6_kx8_decode4<ZmmBytes>(packed, q[z]);
        });
        const int32_t* offset = x.start + (blk32 * 2 + h) * NT;
        static_for<NT>([&](auto t) TESSERA_INLINE {
          const int32_t* xt = &xb[4 * h * NT + t];
          const __m512i start = _mm512_set1_epi32(offset[t]);
          __m512i xv[4];
          if constexpr (NZ > 1) {
            static_for<4>([&](auto u) TESSERA_INLINE { xv[u] = _mm512_set1_epi32(xt[u * NT]); });
          }
          static_for<NZ>([&](auto z) TESSERA_INLINE {
            __m512i dot = start;
            static_for<4>([&](auto u) TESSERA_INLINE {
              dot = NZ == 1 ? dpbusd_broadcast(dot, q[z][u], &xt[u * NT]) : _mm512_dpbusd_epi32(dot, q[z][u], xv[u]);
            });
            s32[z][t] = _mm512_add_epi32(s32[z][t], _mm512_mullo_epi32(dot, sc32[z][k]));
            keep_in_zmm(s32[z][t]);
          });
        });
      });
      static_for<NT>([&](auto t) TESSERA_INLINE {  // q6_kx8_block_step at 16 rows a vector
        const __m512 dx = _mm512_set1_ps(x.scale[blk32 * NT + t]);
        static_for<NZ>([&](auto z) TESSERA_INLINE {
          sb_sum[z][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s32[z][t]), dx, sb_sum[z][t]);
        });
      });
    }
    static_for<NT>([&](auto t) TESSERA_INLINE {  // q6_kx8_finish
      static_for<NZ>([&](auto z) TESSERA_INLINE { acc[z][t] = _mm512_fmadd_ps(sb_sum[z][t], d[z], acc[z][t]); });
    });
  }
  store_tile<NZ, NT>(a, acc, t0, group);
}

// The K-quants' zmm families for zmm_interleaved_rows (matmul_zmm_inl.h): Q4_K unpacks its scales once per tile
// column for all of the column's token tiles.
template <int TileTokens, int MaxRegisters>
struct Q4_KZmmFamily {
  static constexpr ZmmKind kKind = ZmmKind::Q4_K;
  static constexpr int kTileTokens = TileTokens, kMaxRegisters = MaxRegisters;
  using Ymm = Q4_Kx8Family<YmmVnni>;
  using Column = Q4KColumnScales;
  template <int NZ>
  static Column column(const MatmulArgs& a, int64_t group) {
    return unpack_q4_k_column<NZ>(a, group);
  }
  template <int NZ, int NT>
  TESSERA_INLINE static void tile(const MatmulArgs& a, const PackedTile& x, int64_t t0, int64_t group,
                                  const Ahead& ahead, const Column& column) {
    tile_q4_kx8_zmm<NZ, NT>(a, x, t0, group, ahead, column);
  }
};

// Q4_K in tiles of 4 tokens by 32 rows, or 8 tokens by 16 (Q4_KWideZmmFamily; kZmmQ4KWideMinTokens says when).
using Q4_KNarrowZmmFamily = Q4_KZmmFamily<zmm_tile_tokens<ZmmKind::Q4_K>(), 2>;
using Q4_KWideZmmFamily = Q4_KZmmFamily<8, 1>;

// Q6_K in tiles of 4 tokens by 32 rows, or 8 tokens by 16 (Q6_KWideZmmFamily): the 8-token tile decodes each
// weight vector once for twice the tokens, but its columns stream half as many groups at once, which a block of
// 8 tokens or fewer (one tile per column) pays for.
template <int TileTokens, int MaxRegisters>
struct Q6_KZmmFamily : NoColumnState {
  static constexpr ZmmKind kKind = ZmmKind::Q6_K;
  static constexpr int kTileTokens = TileTokens, kMaxRegisters = MaxRegisters;
  using Ymm = Q6_Kx8Family;
  template <int NZ, int NT>
  TESSERA_INLINE static void tile(const MatmulArgs& a, const PackedTile& x, int64_t t0, int64_t group,
                                  const Ahead& ahead, const Column&) {
    tile_q6_kx8_zmm<NZ, NT>(a, x, t0, group, ahead);
  }
};
using Q6_KNarrowZmmFamily = Q6_KZmmFamily<zmm_tile_tokens<ZmmKind::Q6_K>(), 2>;
using Q6_KWideZmmFamily = Q6_KZmmFamily<8, 1>;

// Batches of at least this many tokens take the 512-bit tiles (decode and small batches the 256-bit ones; both
// give the same bits). The K-quants' zmm tiles pay a fixed cost per tile column (Q4_K's scales unpacked for the
// column, Q6_K's wider unpacking) that one token tile does not amortize; from two token tiles on, the later tile
// also requests the next column while it computes (matmul_zmm_inl.h's weight stream). Per product (5632x2048
// from memory, 2 threads, AMD Zen 4, microseconds, zmm against ymm): Q4_Kx8 at 4 tokens 570-643 against
// 343-444, at 5 353-356 against 378-379, at 6 347-358 against 411-571, at 16 710-711 against 923-925; Q6_Kx8 at
// 4 689-792 against 465-663, at 5 495-499 against 528-529, at 8 614-662 against 677-928, at 32 2078-2093
// against 2224-2236 (the Q6_K zmm tile then took the int16 route; its dpbusd tile since is 15-17 % faster at 8
// tokens and more, so the crossing cannot have moved up). On Zen 5, with the stream requests spread over each
// super-block (zmm against ymm, µs, three alternations): Q6_Kx8 at 3 tokens 197-229 against 238-276 (5632x2048)
// and 220-260 against 279-310 (2048x5632), at 4 239-269 against 310-335 and 268-303 against 372-424, at 2 no
// faster (226-241 against 223-246); Q4_Kx8's are still slower at 2-4 tokens (230-310 against 128-218). On Zen 4,
// with the Q6_K zmm tile's lighter float step (c0571c9), Q6_K's zmm tiles win at 2 tokens too, so they start
// there: 5632x2048 314-337 against 373-442, 2048x5632 326-376 against 436-479 (µs, alternating); at 1 token the
// ymm tile stays ahead (299-314 against 327-340), and Q4_K's zmm tiles lose at 1 and 2 (306-351 against 185-234).
// A ymm tile of 2 tokens without requests (matmul_kquant_inl.h's q6_kx8_requests_ahead) beat the zmm tiles on
// TinyLlama's shorter rows, 5632x2048 201-287 against 323-329 and 2048x2048 92-96 against 117-119, but lost on
// longer ones: 2048x5632 360-694 against 310-354, and at a 7-8B model's shapes 4096x4096 547-573 against 458-495,
// 4096x14336 2032-2816 against 1585-1671, 14336x4096 2012-2085 against 1703-2006 (Zen 4, µs, alternating); in
// the model (TinyLlama, one draft token's verification) the two measured level. So 2 tokens stay on zmm; so do
// 3, where a ymm tile without requests lost in the model too (38-41 ms a step against 33-36).
constexpr int64_t kZmmQ4KMinTokens = 5;
constexpr int64_t kZmmQ6KMinTokens = 2;
// From this many tokens Q6_K takes the 8-token tiles (Q6_KWideZmmFamily), while a token block (kZmmBlockBytes
// of activations) holds two of them: with one tile per column the 32-row tiles are faster, which rows longer
// than 12288 values (the ffn_down of 7-8B models) would otherwise meet at any batch. 5632x2048 from memory, 2
// threads, Zen 4, µs, 8-token tiles against 4-token (docs/performance.md): at 5 tokens 733-759 against 448-468,
// at 8 820-894 against 523-600, at 9, 10 and 12 tokens 621-634, 681-721 and 673-742 against 630-772, 709-787
// and 802-817, at 16 836-919 against 929-1085, at 32 1576-1629 against 1736-1949, at 512 25725-29800 against
// 28128-33604 (measured with a narrower last tile, 8 + 1 .. 8 + 4, before the balanced split).
constexpr int64_t kZmmQ6KWideMinTokens = 9;
// Q4_K likewise, from the same batch and with the same condition. Against the 4-token tiles, alternating (2
// threads, Zen 5): `tessera bench` Q4_K prefill 512 292-343 tok/s against 271-284 in five rounds, batch 16
// 152-264 against 182-240 (no difference beyond the host's swing); 5632x2048 from memory at 512 tokens
// 12231-15030 µs against 13369-18772, at 16 tokens 531-662 against 590-707 in two of three; at 6 and 8 tokens
// (one tile per column) the 4-token tiles were faster, 345-481 µs against 447-608 at 8. The tiles compute
// alike (one thread, weights in cache, 8-64 tokens: within 5 % either way), so the gain is in the weight
// stream of the narrower columns; why, these timings do not say.
constexpr int64_t kZmmQ4KWideMinTokens = 9;

// Whether a batch takes the wide family's tiles: from `min_tokens`, while a token block (kZmmBlockBytes of
// activations) holds two of them.
template <typename WideFamily>
bool takes_wide_tiles(const MatmulArgs& args, int64_t min_tokens) {
  return args.n_tokens >= min_tokens && kZmmBlockBytes / args.n_in >= 2 * WideFamily::kTileTokens;
}

// On Intel's AVX-512 cores (decode_kquant_zmm()), one token takes the 512-bit tiles too: decode steps
// (tessera bench, TinyLlama shape, 2 threads, an Intel Xeon with AMX, two runs each) Q4_K 45.7-46.1 tok/s against
// 37.2-38.1 with the 256-bit tiles (69-73 % of the bandwidth against 57-60 %), Q6_K 35.6-36.6 against 28.7-29.0
// (80-85 % against 68 %). AMD's keep the 256-bit ones (Zen 5's 512-bit Q4_K tiles were slower at 2-4 tokens;
// one token there is unmeasured).
bool one_token_zmm(const MatmulArgs& args) { return args.n_tokens == 1 && decode_kquant_zmm(); }

}  // namespace

void matmul_kquant_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  if (args.type == KernelType::Q4_Kx8 && takes_wide_tiles<Q4_KWideZmmFamily>(args, kZmmQ4KWideMinTokens))
    return zmm_interleaved_rows<Q4_KWideZmmFamily>(args, row_begin, row_end);
  if (args.type == KernelType::Q4_Kx8 && (args.n_tokens >= kZmmQ4KMinTokens || one_token_zmm(args)))
    return zmm_interleaved_rows<Q4_KNarrowZmmFamily>(args, row_begin, row_end);
  if (args.type == KernelType::Q6_Kx8 && takes_wide_tiles<Q6_KWideZmmFamily>(args, kZmmQ6KWideMinTokens))
    return zmm_interleaved_rows<Q6_KWideZmmFamily>(args, row_begin, row_end);
  if (args.type == KernelType::Q6_Kx8 && (args.n_tokens >= kZmmQ6KMinTokens || one_token_zmm(args)))
    return zmm_interleaved_rows<Q6_KNarrowZmmFamily>(args, row_begin, row_end);
  kquant_rows_ymm<YmmVnni>(args, row_begin, row_end);
}

}  // namespace tessera::kernels::avx512
