// Q4_K and Q6_K tiles on 256-bit registers, for both x86 levels (matmul_kquant_avx2.cpp,
// matmul_kquant_avx512.cpp): rows, and Q4_Kx8 / Q6_Kx8 (interleaved groups of 8 rows). Anonymous namespace and
// an explicit YmmIsa parameter, as matmul_ymm_inl.h explains.
#pragma once

#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels {
namespace {

// Q4_K's 12 scale bytes hold eight 6-bit scales and eight 6-bit mins. Bytes 0-3: scales 0-3 (low 6 bits),
// bytes 4-7: mins 0-3; bytes 8-11: low nibble scale 4-7, high nibble min 4-7, whose top two bits are the top
// bits of bytes 0-3 (scales) and 4-7 (mins).
inline void q4_k_unpack_scales(const uint8_t* s, uint8_t sc[8], uint8_t mn[8]) {
  uint32_t a, b, c;
  std::memcpy(&a, s, 4);
  std::memcpy(&b, s + 4, 4);
  std::memcpy(&c, s + 8, 4);
  const uint32_t sc_lo = a & 0x3f3f3f3fu, mn_lo = b & 0x3f3f3f3fu;
  const uint32_t sc_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
  std::memcpy(sc, &sc_lo, 4);
  std::memcpy(sc + 4, &sc_hi, 4);
  std::memcpy(mn, &mn_lo, 4);
  std::memcpy(mn + 4, &mn_hi, 4);
}

// The exact product sum of one sub-block, times its scale: Σ u·s over the 4 bytes of each lane, times sc. The
// int16 route (maddubs, then madd by sc instead of by one) and VNNI's (dpbusd, vpmulld) give the same integers;
// u·s pairs stay within int16 (2·15·127).
template <typename Isa>
TESSERA_INLINE inline __m256i scaled_dot(__m256i u, __m256i s, int sc) {
  if constexpr (Isa::kVnni) {
    return _mm256_mullo_epi32(Isa::dot_u8s8(u, s), _mm256_set1_epi32(sc));
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(static_cast<int16_t>(sc)));
  }
}

// Q4_K (144 bytes per 256 values): value = d·sc·q − dmin·m per 32-value sub-block, q in [0, 15]. With one
// activation scale per super-block (ActBlocks::Block256) a super-block's parts are exact integers, Σ_j sc_j·Σq·x
// (an unsigned × signed product per sub-block, scaled in int32) and Σ_j m_j·Σx (the activations' 32-value
// sums), each converted and scaled once per super-block.
template <typename Isa, int NT, int NR>
__attribute__((noinline, flatten)) void tile_q4_k(const TileCtx& c) {
  const int64_t nsb = c.a.n_in / 256;
  const TileActs<NT> x(c.a, c.t0);
  __m256 acc[NT][NR];
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    uint8_t sc[NR][8];
    __m128i mins[NR];  // m_j as int16
    float d[NR], dmin[NR];
    const uint8_t* qs[NR];
    UNROLL
    for (int r = 0; r < NR; ++r) {
      const uint8_t* blk = c.wrow(r) + sb * 144;
      prefetch(blk + kPrefetchBytes);
      prefetch(blk + kPrefetchBytes + 64);
      prefetch(blk + kPrefetchBytes + 128);
      uint8_t mn[8];
      q4_k_unpack_scales(blk + 4, sc[r], mn);
      mins[r] = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i*)mn));
      d[r] = half_to_float(blk);
      dmin[r] = half_to_float(blk + 2);
      qs[r] = blk + 16;
    }
    __m256i sum[NT][NR];
    UNROLL
    for (int t = 0; t < NT; ++t)
      UNROLL
      for (int r = 0; r < NR; ++r) sum[t][r] = _mm256_setzero_si256();
    UNROLL
    for (int g = 0; g < 4; ++g) {
      __m256i lo[NR], hi[NR];
      UNROLL
      for (int r = 0; r < NR; ++r) {
        const __m256i raw = _mm256_loadu_si256((const __m256i*)(qs[r] + 32 * g));
        lo[r] = _mm256_and_si256(raw, mask);
        hi[r] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
      }
      UNROLL
      for (int t = 0; t < NT; ++t) {
        const __m256i x0 = _mm256_loadu_si256((const __m256i*)(x.q[t] + sb * 256 + 64 * g));
        const __m256i x1 = _mm256_loadu_si256((const __m256i*)(x.q[t] + sb * 256 + 64 * g + 32));
        UNROLL
        for (int r = 0; r < NR; ++r) {
          sum[t][r] = _mm256_add_epi32(sum[t][r], scaled_dot<Isa>(lo[r], x0, sc[r][2 * g]));
          sum[t][r] = _mm256_add_epi32(sum[t][r], scaled_dot<Isa>(hi[r], x1, sc[r][2 * g + 1]));
        }
      }
    }
    UNROLL
    for (int t = 0; t < NT; ++t) {
      const float dx = x.scale[t][sb];
      const __m128i sums32 = _mm_loadu_si128((const __m128i*)(x.sum32[t] + sb * 8));
      UNROLL
      for (int r = 0; r < NR; ++r) {
        const __m256i m = _mm256_zextsi128_si256(_mm_madd_epi16(mins[r], sums32));
        acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t][r]), _mm256_set1_ps(d[r] * dx), acc[t][r]);
        acc[t][r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(dmin[r] * dx), acc[t][r]);
      }
    }
  }
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) c.out(t, r) = hsum(acc[t][r]);
}

// Q6_K (210 bytes per 256 values): ql[128] low nibbles, qh[64] two high bits, 16 int8 scales (one per 16
// values), fp16 d; value = d·sc·(q − 32), q in [0, 63]. Scales are applied in the integer pairwise add
// (maddubs then madd by the scale instead of by one); the −32 offset through the activations' 16-value sums.
template <int NT, int NR>
__attribute__((noinline, flatten)) void tile_q6_k(const TileCtx& c) {
  const int64_t nsb = c.a.n_in / 256, nb = c.a.n_in / 32;
  __m256 acc[NT][NR], offs[NT][NR];
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) acc[t][r] = offs[t][r] = _mm256_setzero_ps();
  const int8_t* xq[NT];
  const float* xd[NT];
  const int16_t* xs16[NT];
  UNROLL
  for (int t = 0; t < NT; ++t) {
    xq[t] = c.a.xq.q + (c.t0 + t) * c.a.n_in;
    xd[t] = c.a.xq.scale + (c.t0 + t) * nb;
    xs16[t] = c.a.xq.sum16 + (c.t0 + t) * nb * 2;
  }
  const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk[NR];
    float d[NR];
    __m128i sc8[NR];
    UNROLL
    for (int r = 0; r < NR; ++r) {
      blk[r] = c.wrow(r) + sb * 210;
      for (int line = 0; line < 210; line += 64) prefetch(blk[r] + kPrefetchBytes + line);
      d[r] = half_to_float(blk[r] + 208);
      sc8[r] = _mm_loadu_si128((const __m128i*)(blk[r] + 192));
      const __m256i sc16 = _mm256_cvtepi8_epi16(sc8[r]);
      UNROLL
      for (int t = 0; t < NT; ++t) {
        const __m256i s = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i*)(xs16[t] + sb * 16)));
        const __m256 o = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_loadu_ps(xd[t] + sb * 8));
        offs[t][r] = _mm256_fmadd_ps(o, _mm256_set1_ps(32.0f * d[r]), offs[t][r]);
      }
    }
    UNROLL
    for (int h = 0; h < 2; ++h) {
      UNROLL
      for (int k = 0; k < 4; ++k) {
        // Block k of this half: low bits from ql[32 (k % 2) ...] nibble k / 2, high bits at qh bit 2k.
        __m256i q[NR], scale16[NR];
        UNROLL
        for (int r = 0; r < NR; ++r) {
          const __m256i ql = _mm256_loadu_si256((const __m256i*)(blk[r] + 64 * h + 32 * (k & 1)));
          const __m256i qh = _mm256_loadu_si256((const __m256i*)(blk[r] + 128 + 32 * h));
          const __m256i lo = k < 2 ? _mm256_and_si256(ql, low4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), low4);
          __m256i hb;
          switch (k) {
            case 0: hb = _mm256_slli_epi16(qh, 4); break;
            case 1: hb = _mm256_slli_epi16(qh, 2); break;
            case 2: hb = qh; break;
            default: hb = _mm256_srli_epi16(qh, 2); break;
          }
          q[r] = _mm256_or_si256(lo, _mm256_and_si256(hb, bits45));
          const int s = 8 * h + 2 * k;  // scales s (values 0-15 of the block) and s + 1 (values 16-31)
          const int8_t* scales = reinterpret_cast<const int8_t*>(blk[r] + 192);
          scale16[r] = _mm256_set_m128i(_mm_set1_epi16(scales[s + 1]), _mm_set1_epi16(scales[s]));
        }
        const int64_t b = sb * 8 + 4 * h + k;
        UNROLL
        for (int t = 0; t < NT; ++t) {
          const __m256i xv = _mm256_loadu_si256((const __m256i*)(xq[t] + b * 32));
          const float dx = xd[t][b];
          UNROLL
          for (int r = 0; r < NR; ++r) {
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q[r], xv), scale16[r]);
            acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d[r] * dx), acc[t][r]);
          }
        }
      }
    }
  }
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) c.out(t, r) = hsum(acc[t][r]) - hsum(offs[t][r]);
}

// One Q4_Kx8 super-block's scales for 8 rows (kernels/interleave.h), lane l = row l: d and dmin, the 6-bit
// sc_j as int32 (or, for the int16 route's vpmaddwd, in both int16 halves of the lane), and the mins as int16
// pairs (m_2i, m_2i+1) for vpmaddwd with the activations' 32-value sums.
struct Q4_Kx8Scales {
  __m256 d, dmin;
  __m256i sc[8];
  __m256i mn_pair[4];
};

// The bit operations the K-quants' scale unpacking and packed Q6_K decode take, at 256 bits (the 512-bit tiles
// have their own, ZmmBytes in matmul_kquant_avx512.cpp, so that both widths run one sequence of each).
struct YmmBytes {
  using V = __m256i;
  static V splat(char c) { return _mm256_set1_epi8(c); }
  static V splat32(int c) { return _mm256_set1_epi32(c); }
  static V and_(V a, V b) { return _mm256_and_si256(a, b); }
  static V or_(V a, V b) { return _mm256_or_si256(a, b); }
  template <int k>
  static V srli16(V a) { return _mm256_srli_epi16(a, k); }
  template <int k>
  static V srli32(V a) { return _mm256_srli_epi32(a, k); }
  template <int k>
  static V slli32(V a) { return _mm256_slli_epi32(a, k); }
};

// q4_k_unpack_scales' bit moves with one row per 32-bit lane, from a super-block's three vectors of packed scales
// (a, b, c: bytes 0-3, 4-7 and 8-11 of each row's 12): sc[j] holds scale j in each lane's low byte (with
// kInt16Pairs, in both int16 halves), mn_pair[i] the mins 2i and 2i + 1 as an int16 pair.
template <typename Ops, bool kInt16Pairs>
TESSERA_INLINE inline void q4_k_scale_bits(typename Ops::V a, typename Ops::V b, typename Ops::V c,
                                           typename Ops::V (&sc_out)[8], typename Ops::V (&mn_pair)[4]) {
  using V = typename Ops::V;
  const V m6 = Ops::splat(0x3f), m4 = Ops::splat(0x0f), top2 = Ops::splat(0x30);
  const V sc[2] = {Ops::and_(a, m6), Ops::or_(Ops::and_(c, m4), Ops::and_(Ops::template srli32<2>(a), top2))};
  const V mn[2] = {Ops::and_(b, m6), Ops::or_(Ops::and_(Ops::template srli32<4>(c), m4),
                                              Ops::and_(Ops::template srli32<2>(b), top2))};
  const V byte = Ops::splat32(0xff), second_byte = Ops::splat32(0xff00);
  static_for<8>([&](auto j) TESSERA_INLINE {
    constexpr int half = decltype(j)::value / 4, shift = 8 * (decltype(j)::value % 4);
    const V v = Ops::and_(Ops::template srli32<shift>(sc[half]), byte);
    sc_out[j] = kInt16Pairs ? Ops::or_(v, Ops::template slli32<16>(v)) : v;
  });
  static_for<4>([&](auto i) TESSERA_INLINE {  // bytes 2(i % 2), 2(i % 2) + 1 of mn[i / 2]: m_2i, m_2i+1
    const V v = Ops::template srli32<16 * (decltype(i)::value % 2)>(mn[decltype(i)::value / 2]);
    mn_pair[i] = Ops::or_(Ops::and_(v, byte), Ops::template slli32<8>(Ops::and_(v, second_byte)));
  });
}

// One 8-row group's super-block scales, one row per 32-bit lane (q4_k_scale_bits for the packed 6-bit ones). The
// first vector's lanes hold each row's fp16 (d, dmin) pair; one byte shuffle and one qword permute gather the 8 d
// and then the 8 dmin.
template <bool kInt16Pairs>
TESSERA_INLINE inline void q4_kx8_scales(const uint8_t* blk, Q4_Kx8Scales& out) {
  const __m256i pairs = _mm256_loadu_si256((const __m256i*)blk);
  const __m256i a = _mm256_loadu_si256((const __m256i*)(blk + 32));
  const __m256i b = _mm256_loadu_si256((const __m256i*)(blk + 64));
  const __m256i c = _mm256_loadu_si256((const __m256i*)(blk + 96));
  const __m256i d_then_dmin = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                                                0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const __m256i split = _mm256_shuffle_epi8(pairs, d_then_dmin);
  const __m256i ordered = _mm256_permute4x64_epi64(split, 0xd8);  // d0-3, d4-7, dmin0-3, dmin4-7
  out.d = _mm256_cvtph_ps(_mm256_castsi256_si128(ordered));
  out.dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(ordered, 1));
  q4_k_scale_bits<YmmBytes, kInt16Pairs>(a, b, c, out.sc, out.mn_pair);
}

// Σ_j m_j·(Σx over sub-block j) of one super-block for the 8 rows: four vpmaddwd of the mins pairs by the
// token's 32-value sums taken two at a time.
TESSERA_INLINE inline __m256i q4_kx8_min_sum(const Q4_Kx8Scales& s, const int16_t* sum32) {
  __m256i m = _mm256_madd_epi16(s.mn_pair[0], broadcast32(sum32));
  static_for<3>([&](auto i) TESSERA_INLINE {
    constexpr int k = decltype(i)::value + 1;
    m = _mm256_add_epi32(m, _mm256_madd_epi16(s.mn_pair[k], broadcast32(sum32 + 2 * k)));
  });
  return m;
}

// acc += d·dx·Σ_j sc_j·Σq·x − dmin·dx·Σ_j m_j·Σx: the float step every Q4_Kx8 tile ends a super-block with (the
// 512-bit tile runs the same operations on 16 rows a vector).
TESSERA_INLINE inline __m256 q4_k_finish(__m256 acc, __m256i qx, __m256i mins, __m256 d, __m256 dmin, __m256 dx) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(qx), _mm256_mul_ps(d, dx), acc);
  return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dmin, dx), acc);
}

// Q4_Kx8 (kernels/interleave.h), NG groups of 8 rows (1, or 2 from `group`) for NT tokens. value =
// d·sc_j·q − dmin·m_j per 32-value sub-block j, q in [0, 15]. Each super-block's scales are unpacked once for the
// NT tokens (q4_kx8_scales); sub-block j is then Q4_0x8's scheme: 8 vectors of its nibbles (values 4u..4u+3 of
// the 8 rows) times those 4 activation bytes broadcast, summed in int16 (at most 8·2·15·128 = 30720) and widened
// by vpmaddwd with the rows' sc_j into the super-block's int32 sum. With VNNI each product goes into an int32 sum
// directly (one vpdpbusd for vpmaddubsw and the int16 add), which vpmulld scales: the same integer. The min part
// is the super-block's Σ_j m_j·Σx (q4_kx8_min_sum), and one float step per super-block ends it (q4_k_finish).
// With two groups each broadcast serves both groups' vectors. The same operations for every (group, token)
// element whatever NT and NG are (batch invariance). Its lambdas, and Q6_Kx8's, are marked always-inline: with
// bodies this large `flatten` alone left Q6_Kx8's block loop out of line at 3-4 tokens, its accumulators in
// memory.
// From this many sums (tokens × groups) a tile loops over its super-block's 4 steps of 64 values instead of
// unrolling them (static_for.h's for_steps; the 512-bit tiles' reason, matmul_kquant_avx512.cpp). From memory
// (5632x2048, 2 threads, Zen 5, µs, four or five alternations against the unrolled tiles): at 4 tokens 184-230
// against 216-248 with VNNI, 210-227 against 262-291 at the AVX2 level, where 8 tokens take 416-419 against
// 458-517. Fewer sums (decode) stay unrolled: looped, 1-2 tokens were slower (130-150 against 90-134 at 1).
constexpr int kQ4_Kx8LoopSums = 4;

// Whether a 256-bit K-quant tile requests its weights ahead (prefetch_block_part_at). Decode's tiles do not: for
// a tile of one sum (Q4_Kx8: one token, one group) or of up to two tokens (Q6_Kx8) the hardware prefetchers kept
// up with the stream better, as for the 8-bit types' lone 512-bit tiles (matmul_zmm_inl.h's lone_tile_streams).
// 5632x2048 from memory, 2 threads, Zen 4, µs, alternating with the requests: at 1 token Q4_Kx8 107-179 against
// 149-245, Q6_Kx8 175-273 against 279-391 (over F16x32's time in the same run: 0.25-0.33 against 0.30-0.44, and
// 0.42-0.51 against 0.49-0.83; the weights' share is 0.28 and 0.41), and likewise at a 7-8B model's shapes
// (4096x14336 Q4_Kx8 940 against 1195, Q6_Kx8 1472 against 1793; 14336x4096 913 against 1037-1125, 1363-1382
// against 1663-1740). Q6_Kx8 at 2 tokens 201-287 against 379-397 (5632x2048; at the AVX2 level 231-287 against
// 406-540, and level at 4096x4096 and 4096x14336). The requests stay where they help: Q4_Kx8 at 4 tokens 208-222
// against 296-300 without, Q6_Kx8's AVX2 3-token tile 316-384 against 330-402; Q4_Kx8 at 2 tokens measured level
// either way. Not measured on Zen 5, where the spread requests were chosen over bursts.
constexpr bool q4_kx8_requests_ahead(int sums) { return sums > 1; }
constexpr bool q6_kx8_requests_ahead(int tokens) { return tokens > 2; }

template <typename Isa, int NT, int NG = 1>
__attribute__((noinline, flatten)) void tile_q4_kx8(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 1152;  // 36 vectors: (d, dmin), 3 of packed scales, 32 of quants
  const int64_t nsb = a.n_in / 256;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  // vpdpbusd's latency chains a sub-block's 8 products per sum, where the int16 route chains only its 1-cycle
  // adds: a tile of one sum (one token, one group) splits it into two alternating chains. Tiles of two or more
  // sums already have that many independent chains; splitting theirs too was level from memory at two sums and
  // 10 % slower at four (2 threads, Zen 4).
  constexpr int kChains = Isa::kVnni && NT * NG == 1 ? 2 : 1;
  constexpr bool kUnrolled = NT * NG < kQ4_Kx8LoopSums;
  const TileActs<NT> x(a, t0);
  __m256 acc[NG][NT];
  static_for<NG>([&](auto g) TESSERA_INLINE {
    static_for<NT>([&](auto t) TESSERA_INLINE { acc[g][t] = _mm256_setzero_ps(); });
  });
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk[NG];
    alignas(32) Q4_Kx8Scales s[NG];
    __m256i qx[NG][NT];  // Σ_j sc_j·Σq·x
    static_for<NG>([&](auto g) TESSERA_INLINE {
      blk[g] = group_block_unrequested(a, group + g, sb, kBlockBytes);
      q4_kx8_scales<!Isa::kVnni>(blk[g], s[g]);
      static_for<NT>([&](auto t) TESSERA_INLINE { qx[g][t] = _mm256_setzero_si256(); });
    });
    for_steps<4, kUnrolled>([&](int chunk) TESSERA_INLINE {  // sub-blocks 2·chunk (low nibbles), 2·chunk + 1
      static_for<2>([&](auto half) TESSERA_INLINE {
        const int j = 2 * chunk + decltype(half)::value;
        constexpr bool high = decltype(half)::value == 1;
        if constexpr (q4_kx8_requests_ahead(NT * NG))
          static_for<NG>([&](auto g) TESSERA_INLINE { prefetch_block_part_at<kBlockBytes, 8>(blk[g], j); });
        __m256i sum[kChains][NG][NT];  // int16 pairs (AVX2) or int32 (VNNI)
        static_for<kChains>([&](auto c) TESSERA_INLINE {
          static_for<NG>([&](auto g) TESSERA_INLINE {
            static_for<NT>([&](auto t) TESSERA_INLINE { sum[c][g][t] = _mm256_setzero_si256(); });
          });
        });
        static_for<8>([&](auto u) TESSERA_INLINE {
          constexpr int c = decltype(u)::value % kChains;  // this product's chain
          __m256i q[NG];
          static_for<NG>([&](auto g) TESSERA_INLINE {
            const __m256i p = _mm256_loadu_si256((const __m256i*)(blk[g] + 128 + 32 * (8 * chunk + u)));
            q[g] = high ? _mm256_and_si256(_mm256_srli_epi16(p, 4), low4) : _mm256_and_si256(p, low4);
          });
          static_for<NT>([&](auto t) TESSERA_INLINE {
            const __m256i xv = broadcast32(x.q[t] + sb * 256 + 32 * j + 4 * u);
            static_for<NG>([&](auto g) TESSERA_INLINE {
              if constexpr (Isa::kVnni)
                sum[c][g][t] = Isa::dpbusd(sum[c][g][t], q[g], xv);
              else
                sum[c][g][t] = _mm256_add_epi16(sum[c][g][t], _mm256_maddubs_epi16(q[g], xv));
              keep_in_register(sum[c][g][t]);
            });
          });
        });
        static_for<NG>([&](auto g) TESSERA_INLINE {
          const __m256i sc = s[g].sc[j];
          static_for<NT>([&](auto t) TESSERA_INLINE {
            if constexpr (Isa::kVnni) {
              __m256i s32 = sum[0][g][t];
              if constexpr (kChains == 2) s32 = _mm256_add_epi32(s32, sum[1][g][t]);
              qx[g][t] = _mm256_add_epi32(qx[g][t], _mm256_mullo_epi32(s32, sc));
            } else {
              qx[g][t] = _mm256_add_epi32(qx[g][t], _mm256_madd_epi16(sum[0][g][t], sc));
            }
          });
        });
      });
    });
    static_for<NG>([&](auto g) TESSERA_INLINE {
      static_for<NT>([&](auto t) TESSERA_INLINE {
        const __m256i mins = q4_kx8_min_sum(s[g], x.sum32[t] + sb * 8);
        acc[g][t] = q4_k_finish(acc[g][t], qx[g][t], mins, s[g].d, s[g].dmin, _mm256_broadcast_ss(x.scale[t] + sb));
      });
    });
  }
  static_for<NG>([&](auto g) TESSERA_INLINE {
    static_for<NT>([&](auto t) TESSERA_INLINE {
      _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + (group + g) * 8, acc[g][t]);
    });
  });
}

// Q6_Kx8 (kernels/interleave.h), one group of 8 rows for NT tokens. value = d·sc_j·(q − 32) per 16-value
// sub-block j, q in [0, 63]: value vector v holds values 4v..4v + 3 of the 8 rows, so sub-block j is vectors
// 4j..4j + 3 (q6_kx8_values decodes them from 3 packed ones) and activation block b holds sub-blocks 2b and
// 2b + 1. Per block and token: two vpmaddubsw add in int16 (at most 2·2·63·127 = 32004), vpmaddwd by the
// sub-block's scale widens them; the −32 offset is 32·Σ sc_j·(Σx over sub-block j) from the activations'
// 16-value sums, all exact in int32. The float steps: per block one conversion and one FMA by the block's
// activation scale into the super-block's sum (q6_kx8_block_step), and per super-block one FMA by the rows' d
// (q6_kx8_finish), whose d is the super-block's alone: one multiplication per block fewer than scaling each block
// by d·dx. The same operations for every token whatever NT is. Batches take an unpacked copy (Q6_Kx8Unpacked)
// whose products reach the same int32 sums by other exact steps, then the same float steps: the same bits either
// way (batch invariance).
constexpr int kQ6_Kx8BlockBytes = 1680;  // 8 fp16 d, then 52 vectors: 48 of packed values, 4 of scales

// One super-block's 8 d and scales in the form the products take them.
struct Q6_Kx8Scales {
  __m256 d;
  __m256i sc_pair[16];     // sub-block j: each row's sc_j as an (sc_j, sc_j) int16 pair, lane l = row l
  __m256i offset_pair[8];  // block b: each row's (32·sc_2b, 32·sc_2b+1) int16 pair (|32·sc| ≤ 4096), the −32 offset's
};

// Each int16 is built as (scale byte << 8) by one byte shuffle and shifted back arithmetically: by 8 for the
// sign-extended scale, by 3 for 32 times it (exact: the low 8 bits are zero).
template <int lo, int hi>
TESSERA_INLINE inline __m256i q6_kx8_high_bytes(__m256i v) {
  constexpr char z = char(0x80);  // vpshufb writes zero
  return _mm256_shuffle_epi8(v, _mm256_setr_epi8(z, lo, z, hi, z, 4 + lo, z, 4 + hi, z, 8 + lo, z, 8 + hi, z, 12 + lo,
                                                 z, 12 + hi, z, lo, z, hi, z, 4 + lo, z, 4 + hi, z, 8 + lo, z, 8 + hi,
                                                 z, 12 + lo, z, 12 + hi));
}

TESSERA_INLINE inline void q6_kx8_scales(const uint8_t* blk, Q6_Kx8Scales& s) {
  s.d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)blk));
  const uint8_t* scales = blk + 16 + 48 * 32;
  static_for<4>([&](auto k) TESSERA_INLINE {
    // Byte 4l + i: row l's scale of sub-block 4k + i.
    const __m256i v = _mm256_loadu_si256((const __m256i*)(scales + 32 * k));
    static_for<4>([&](auto i) TESSERA_INLINE {
      constexpr int j = decltype(i)::value;
      s.sc_pair[4 * k + j] = _mm256_srai_epi16(q6_kx8_high_bytes<j, j>(v), 8);
    });
    static_for<2>([&](auto i) TESSERA_INLINE {
      constexpr int j = 2 * decltype(i)::value;
      s.offset_pair[2 * k + decltype(i)::value] = _mm256_srai_epi16(q6_kx8_high_bytes<j, j + 1>(v), 3);
    });
  });
}

// Value vectors W(4k)..W(4k + 3) of a Q6_Kx8 super-block, q in [0, 63] as unsigned bytes, from its packed
// vectors p = V(3k)..V(3k + 2) (interleave.h): three masks, then the fourth value's bit pairs gathered from the
// three top pairs with a shift right by 2 after each. Every shift finds each byte's low two bits clear, so the
// 16-bit shifts carry nothing across bytes. 11 instructions for 4 vectors.
template <typename Ops>
TESSERA_INLINE inline void q6_kx8_decode4(const typename Ops::V (&p)[3], typename Ops::V (&w)[4]) {
  using V = typename Ops::V;
  const V low6 = Ops::splat(0x3f), top2 = Ops::splat(char(0xc0));
  static_for<3>([&](auto j) TESSERA_INLINE { w[j] = Ops::and_(p[j], low6); });
  const V t = Ops::template srli16<2>(Ops::and_(p[0], top2));               // p0's pair in bits 4-5
  const V u = Ops::template srli16<2>(Ops::or_(t, Ops::and_(p[1], top2)));  // p0's in bits 2-3, p1's in 4-5
  w[3] = Ops::template srli16<2>(Ops::or_(u, Ops::and_(p[2], top2)));       // p0's, p1's, p2's in 0-1, 2-3, 4-5
}

// Value vectors 4k..4k + 3 (values 16k..16k + 15 of the 8 rows: sub-block k) of the super-block at blk.
TESSERA_INLINE inline void q6_kx8_values(const uint8_t* blk, int k, __m256i (&w)[4]) {
  const uint8_t* p = blk + 16 + 3 * 32 * k;
  const __m256i packed[3] = {_mm256_loadu_si256((const __m256i*)p), _mm256_loadu_si256((const __m256i*)(p + 32)),
                             _mm256_loadu_si256((const __m256i*)(p + 64))};
  q6_kx8_decode4<YmmBytes>(packed, w);
}

// sb_sum[t] += sum[t] · (token t's activation scale of block blk32): the float step every Q6_Kx8 tile ends a
// block with, whichever way it reached the exact integer sums.
template <int NT>
TESSERA_INLINE inline void q6_kx8_block_step(const __m256i (&sum)[NT], const TileActs<NT>& x, int64_t blk32,
                                             __m256 (&sb_sum)[NT]) {
  static_for<NT>([&](auto t) TESSERA_INLINE {
    sb_sum[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), _mm256_broadcast_ss(x.scale[t] + blk32), sb_sum[t]);
  });
}

// acc[t] += sb_sum[t] · d, and sb_sum[t] = 0: the float step every Q6_Kx8 tile ends a super-block with.
template <int NT>
TESSERA_INLINE inline void q6_kx8_finish(__m256 (&sb_sum)[NT], __m256 d, __m256 (&acc)[NT]) {
  static_for<NT>([&](auto t) TESSERA_INLINE {
    acc[t] = _mm256_fmadd_ps(sb_sum[t], d, acc[t]);
    sb_sum[t] = _mm256_setzero_ps();
  });
}

// sb_sum[t] += activation block b of super-block sb times the 8 rows of blk, for NT tokens (without their d).
template <int NT>
TESSERA_INLINE inline void q6_kx8_block(const uint8_t* blk, const Q6_Kx8Scales& s, const TileActs<NT>& x,
                                        int64_t sb, int b, __m256 (&sb_sum)[NT]) {
  __m256i s32[NT];
  static_for<NT>([&](auto t) TESSERA_INLINE { s32[t] = _mm256_setzero_si256(); });
  static_for<2>([&](auto half) TESSERA_INLINE {  // sub-block 2b + half: value vectors 8b + 4·half..+3
    const int k = 2 * b + decltype(half)::value;
    __m256i q[4];
    q6_kx8_values(blk, k, q);
    const __m256i sc = s.sc_pair[k];
    static_for<2>([&](auto h) TESSERA_INLINE {  // vectors 2h, 2h + 1 of the four: one vpmaddubsw pair
      static_for<NT>([&](auto t) TESSERA_INLINE {
        const int8_t* xu = x.q[t] + sb * 256 + 16 * k + 8 * decltype(h)::value;
        const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(q[2 * h], broadcast32(xu)),
                                             _mm256_maddubs_epi16(q[2 * h + 1], broadcast32(xu + 4)));
        s32[t] = _mm256_add_epi32(s32[t], _mm256_madd_epi16(s16, sc));
        keep_in_register(s32[t]);
      });
    });
  });
  const int64_t blk32 = sb * 8 + b;
  static_for<NT>([&](auto t) TESSERA_INLINE {
    const __m256i offset = _mm256_madd_epi16(s.offset_pair[b], broadcast32(x.sum16[t] + 2 * blk32));
    s32[t] = _mm256_sub_epi32(s32[t], offset);
  });
  q6_kx8_block_step<NT>(s32, x, blk32, sb_sum);
}

#ifdef TESSERA_YMM_VNNI
// q6_kx8_block for one token with VNNI (the files compiled for AVX-512 VNNI, whose 256-bit tiles serve decode):
// each 16-value sub-block's dot product in int32 from −32·Σx (vpdpbusd, activation bytes broadcast inside the
// instruction), times its scale (vpmulld): Σ_j sc_j·(Σ q·x − 32·Σx) over the block's two sub-blocks, the same exact
// integer as the int16 route's, then the same float step. Fewer instructions than the int16 route's vpmaddubsw
// pairs, widening and offset: with the rows in L2 (512x2048, one thread, Zen 4) a core reads 40-41 GB/s against
// 37-38, and a decode step after 32 positions (TinyLlama shape, 2 threads, steps alternated in one process) took
// 0.958 [0.954, 0.962] of the time in the minutes when the host's memory is fast (547 rounds). (An earlier
// comparison by whole runs, at 1-2 tokens, had read it 4-8 % slower from memory: within the host's swing.)
TESSERA_INLINE inline void q6_kx8_block_vnni_one_token(const uint8_t* blk, const Q6_Kx8Scales& s, const TileActs<1>& x,
                                                       int64_t sb, int b, __m256 (&sb_sum)[1]) {
  __m256i s32[1] = {_mm256_setzero_si256()};
  static_for<2>([&](auto half) TESSERA_INLINE {
    const int k = 2 * b + decltype(half)::value;
    __m256i q[4];
    q6_kx8_values(blk, k, q);
    const int8_t* xu = x.q[0] + sb * 256 + 16 * k;
    __m256i d = _mm256_set1_epi32(-32 * int32_t{x.sum16[0][sb * 16 + k]});
    static_for<4>([&](auto v) TESSERA_INLINE { d = dpbusd_broadcast_ymm(d, q[v], xu + 4 * v); });
    s32[0] = _mm256_add_epi32(s32[0], _mm256_mullo_epi32(d, _mm256_srai_epi32(s.sc_pair[k], 16)));
  });
  q6_kx8_block_step<1>(s32, x, sb * 8 + b, sb_sum);
}
#endif

// Straight from the interleaved blocks: each tile assembles every value it multiplies (about half its vector
// instructions), the right trade for a token or a few. With VNNI one token takes q6_kx8_block_vnni_one_token (four
// vpdpbusd and a vpmulld per sub-block, the 512-bit tile's way); more tokens keep the int16 route.
// Likewise, from this many tokens Q6_Kx8's tile loops over its 8 blocks of 32 values (at the AVX2 level batches
// below the unpacked tiles' take it; with AVX-512 the 512-bit tiles take 3 tokens and more, and the looped tile
// serves only a column's odd last group of 8 rows). AVX2 level, 5632x2048, four alternations against unrolled: at 3
// tokens 205-248 µs against 220-285, at 4 253-274 against 295-344.
constexpr int kQ6_Kx8LoopTokens = 3;
template <int NT>
__attribute__((noinline, flatten)) void tile_q6_kx8(const MatmulArgs& a, int64_t t0, int64_t group) {
  const int64_t nsb = a.n_in / 256;
  const TileActs<NT> x(a, t0);
  __m256 acc[NT], sb_sum[NT];
  static_for<NT>([&](auto t) TESSERA_INLINE { acc[t] = sb_sum[t] = _mm256_setzero_ps(); });
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk = group_block_unrequested(a, group, sb, kQ6_Kx8BlockBytes);
    alignas(32) Q6_Kx8Scales s;
    q6_kx8_scales(blk, s);
    for_steps<8, (NT < kQ6_Kx8LoopTokens)>([&](int b) TESSERA_INLINE {
      if constexpr (q6_kx8_requests_ahead(NT)) prefetch_block_part_at<kQ6_Kx8BlockBytes, 8>(blk, b);
#ifdef TESSERA_YMM_VNNI
      if constexpr (NT == 1) {
        q6_kx8_block_vnni_one_token(blk, s, x, sb, b, sb_sum);
      } else
#endif
      {
        q6_kx8_block<NT>(blk, s, x, sb, b, sb_sum);
      }
    });
    q6_kx8_finish<NT>(sb_sum, s.d, acc);
  }
  static_for<NT>([&](auto t) TESSERA_INLINE { _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + group * 8, acc[t]); });
}

// One group's super-block unpacked for batches: its values assembled once, as w = q − 32 in [−32, 31], to be
// multiplied with u = x + 128 in [0, 255] (vpmaddubsw takes u unsigned, w signed; two products added in int16 stay
// within 2·2·255·32 = 32640). Then Σ_j sc_j·Σ w·u = Σ_j sc_j·Σ q·x − 32·Σ_j sc_j·Σx + corr, where
// corr = 128·Σ_j sc_j·Σ w depends on the weights alone: subtracting it gives the direct tile's integers exactly,
// without its per-token offset product. 2848 bytes, read by every token tile of a block instead of 1680 that
// each would unpack again.
struct Q6_Kx8Unpacked {
  __m256 d;
  __m256i sc_pair[16];  // as Q6_Kx8Scales::sc_pair
  __m256i corr[8];      // block b: corr over its two sub-blocks, lane l = row l
  __m256i w[64];        // value vector v (values 4v..4v + 3) as q − 32
};

TESSERA_INLINE inline void q6_kx8_unpack(const MatmulArgs& a, int64_t group, Q6_Kx8Unpacked* out) {
  const int64_t nsb = a.n_in / 256;
  const __m256i k32 = _mm256_set1_epi8(32), k128 = _mm256_set1_epi8(char(0x80));
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk = group_block(a, group, sb, kQ6_Kx8BlockBytes);
    Q6_Kx8Unpacked& o = out[sb];
    alignas(32) Q6_Kx8Scales s;
    q6_kx8_scales(blk, s);
    o.d = s.d;
    static_for<16>([&](auto j) TESSERA_INLINE { o.sc_pair[j] = s.sc_pair[j]; });
    static_for<8>([&](auto b) TESSERA_INLINE {
      __m256i corr = _mm256_setzero_si256();
      static_for<2>([&](auto half) TESSERA_INLINE {
        constexpr int k = 2 * b + decltype(half)::value;
        __m256i w[4];
        q6_kx8_values(blk, k, w);
        static_for<4>([&](auto i) TESSERA_INLINE {
          w[i] = _mm256_sub_epi8(w[i], k32);
          _mm256_store_si256(&o.w[4 * k + i], w[i]);
        });
        static_for<2>([&](auto h) TESSERA_INLINE {
          const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(k128, w[2 * h]),
                                               _mm256_maddubs_epi16(k128, w[2 * h + 1]));
          corr = _mm256_add_epi32(corr, _mm256_madd_epi16(s16, s.sc_pair[k]));
        });
      });
      o.corr[b] = corr;
    });
  }
}

// NT tokens from u0 (token t's u = x + 128 at u0 + t·n_in) times one unpacked group.
template <int NT>
__attribute__((noinline, flatten)) void tile_q6_kx8_unpacked(const MatmulArgs& a, const Q6_Kx8Unpacked* w,
                                                             const uint8_t* u0, int64_t t0, int64_t group) {
  const int64_t nsb = a.n_in / 256;
  const TileActs<NT> x(a, t0);
  __m256 acc[NT], sb_sum[NT];
  static_for<NT>([&](auto t) TESSERA_INLINE { acc[t] = sb_sum[t] = _mm256_setzero_ps(); });
  for (int64_t sb = 0; sb < nsb; ++sb) {
    static_for<8>([&](auto bi) TESSERA_INLINE {
      constexpr int b = decltype(bi)::value;
      __m256i s32[NT];
      static_for<NT>([&](auto t) TESSERA_INLINE { s32[t] = _mm256_setzero_si256(); });
      static_for<4>([&](auto up) TESSERA_INLINE {  // vectors 8b + 2up, 8b + 2up + 1: q6_kx8_block's pairs
        const __m256i* wv = &w[sb].w[8 * b + 2 * decltype(up)::value];
        const __m256i w0 = _mm256_load_si256(wv), w1 = _mm256_load_si256(wv + 1);
        const __m256i sc = w[sb].sc_pair[2 * b + decltype(up)::value / 2];
        static_for<NT>([&](auto t) TESSERA_INLINE {
          const uint8_t* uu = u0 + t * a.n_in + sb * 256 + 32 * b + 8 * decltype(up)::value;
          const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(broadcast32(uu), w0),
                                               _mm256_maddubs_epi16(broadcast32(uu + 4), w1));
          s32[t] = _mm256_add_epi32(s32[t], _mm256_madd_epi16(s16, sc));
          keep_in_register(s32[t]);
        });
      });
      static_for<NT>([&](auto t) TESSERA_INLINE { s32[t] = _mm256_sub_epi32(s32[t], w[sb].corr[b]); });
      q6_kx8_block_step<NT>(s32, x, sb * 8 + b, sb_sum);
    });
    q6_kx8_finish<NT>(sb_sum, w[sb].d, acc);
  }
  static_for<NT>([&](auto t) TESSERA_INLINE { _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + group * 8, acc[t]); });
}

// From this many tokens a Q6_Kx8 product unpacks each group once per token block (q6_kx8_unpacked_rows).
// 1-core products of 5632x2048 (Zen 3) against the direct tiles, alternated: 0.92-0.98x at 6 tokens,
// 0.97-1.04x at 8, 1.07-1.16x at 10. From 12 to 512 tokens a first unpacked form (q·x with the per-token offset
// product) measured 1.06-1.37x against them, and this one 6-10 % faster again.
constexpr int64_t kQ6_Kx8UnpackMinTokens = 10;

// Q6_Kx8 batches: interleaved_rows' order (token blocks outside, groups inside), each group unpacked once per
// token block into a per-thread copy that its tiles then read, and the block's activations rewritten once as
// u = x + 128 (x's bytes with the top bit flipped). Only those bytes are read per token (no |x|), so a block
// holds twice the tokens of interleaved_rows' in the same L2 share.
inline void q6_kx8_unpacked_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  // Grown on demand and kept: steady state allocates nothing.
  thread_local std::vector<Q6_Kx8Unpacked> unpacked;
  thread_local std::vector<uint8_t> acts_u;
  const size_t nsb = static_cast<size_t>(a.n_in / 256);
  if (unpacked.size() < nsb) unpacked.resize(nsb);
  const int64_t block = std::max<int64_t>(4, (192 << 10) / a.n_in / 4 * 4);
  const size_t block_bytes = static_cast<size_t>(std::min(block, a.n_tokens) * a.n_in);
  if (acts_u.size() < block_bytes) acts_u.resize(block_bytes);
  const __m256i top_bit = _mm256_set1_epi8(char(0x80));
  for (int64_t tb = 0; tb < a.n_tokens; tb += block) {
    const int64_t te = std::min(a.n_tokens, tb + block);
    const int8_t* xq = a.xq.q + tb * a.n_in;
    for (int64_t i = 0; i < (te - tb) * a.n_in; i += 32) {  // n_in is a multiple of 256
      const __m256i v = _mm256_loadu_si256((const __m256i*)(xq + i));
      _mm256_storeu_si256((__m256i*)(acts_u.data() + i), _mm256_xor_si256(v, top_bit));
    }
    auto u = [&](int64_t t) { return acts_u.data() + (t - tb) * a.n_in; };
    for (int64_t g = row_begin / 8; g < row_end / 8; ++g) {
      q6_kx8_unpack(a, g, unpacked.data());
      int64_t t = tb;
      for (; t + 4 <= te; t += 4) tile_q6_kx8_unpacked<4>(a, unpacked.data(), u(t), t, g);
      switch (te - t) {
        case 3: tile_q6_kx8_unpacked<3>(a, unpacked.data(), u(t), t, g); break;
        case 2: tile_q6_kx8_unpacked<2>(a, unpacked.data(), u(t), t, g); break;
        case 1: tile_q6_kx8_unpacked<1>(a, unpacked.data(), u(t), t, g); break;
        default: break;
      }
    }
  }
}

template <typename Isa>
struct Q4_KTile {
  template <int NT, int NR>
  static void run(const TileCtx& c) { tile_q4_k<Isa, NT, NR>(c); }
};

template <typename Isa>
struct Q6_KTile {
  template <int NT, int NR>
  static void run(const TileCtx& c) { tile_q6_k<NT, NR>(c); }
};

// Q4_Kx8 and Q6_Kx8 for interleaved_rows: tiles of up to 4 tokens, one group at a time, and for Q4_Kx8 4-token
// pair tiles (two groups).
template <typename Isa>
struct Q4_Kx8Family {
  static constexpr bool kPairs = true;
  static constexpr bool kWide = false;
  template <int NT>
  static void tile(const MatmulArgs& a, int64_t t0, int64_t group) { tile_q4_kx8<Isa, NT>(a, t0, group); }
  template <int NT>
  static void pair_tile(const MatmulArgs& a, int64_t t0, int64_t group) { tile_q4_kx8<Isa, NT, 2>(a, t0, group); }
};
struct Q6_Kx8Family {
  static constexpr bool kPairs = false;
  static constexpr bool kWide = false;
  template <int NT>
  static void tile(const MatmulArgs& a, int64_t t0, int64_t group) { tile_q6_kx8<NT>(a, t0, group); }
};

// Q4_K, Q6_K, Q4_Kx8 or Q6_Kx8 rows [row_begin, row_end) on 256-bit tiles.
template <typename Isa>
void kquant_rows_ymm(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.type) {
    case KernelType::Q4_K: return row_tiles<Isa, Q4_KTile<Isa>>(a, row_begin, row_end, 0);
    case KernelType::Q6_K: return row_tiles<Isa, Q6_KTile<Isa>>(a, row_begin, row_end, 0);
    case KernelType::Q4_Kx8: return interleaved_rows<Q4_Kx8Family<Isa>>(a, row_begin, row_end);
    case KernelType::Q6_Kx8:
      if (a.n_tokens >= kQ6_Kx8UnpackMinTokens) return q6_kx8_unpacked_rows(a, row_begin, row_end);
      return interleaved_rows<Q6_Kx8Family>(a, row_begin, row_end);
    default: return;
  }
}

}  // namespace
}  // namespace tessera::kernels
