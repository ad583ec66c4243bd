// 256-bit helpers and tile drivers shared by the x86 matmul kernels of every weight-type family, at the AVX2 and
// the AVX-512 level alike (matmul_<family>_avx2.cpp / matmul_<family>_avx512.cpp include it).
//
// Everything here sits in an anonymous namespace: each ISA file compiles its own copy with its own -m flags,
// and no copy built with wider instructions can be picked by the linker for another file. What differs between
// the two levels (the byte dot product, the tile shapes) comes in as an explicit parameter, a YmmIsa type
// (YmmAvx2 or YmmVnni below), never as a name the includer defines.
//
// All vectors are 256 bits wide: a block of 32 int8 values is one register, and AVX-512 helps through VNNI and
// its 32 registers rather than width (its 512-bit tiles are in matmul_zmm_inl.h).
//
// Batch invariance: every output element (t, o) is reduced by the same sequence of vector operations,
// whichever tile it falls in, so results do not depend on n_tokens, on the other tokens, or on the row split.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "matmul_ymm_inl.h is for files compiled with AVX2, FMA and F16C (*_avx2.cpp, *_avx512.cpp)"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/hsum_ymm_inl.h"
#include "kernels/matmul_kernels.h"
#include "kernels/static_for.h"

// Loops over a tile's tokens and rows must be unrolled so that accumulators live in registers.
#define UNROLL _Pragma("GCC unroll 16")

namespace tessera::kernels {
namespace {

// ---- the two ISA levels -------------------------------------------------------------------------------------

// AVX2: maddubs adds adjacent byte products into int16 (no saturation: |u| ≤ 128, |s| ≤ 127 gives at most
// 32512), madd by one adds adjacent pairs into int32: lane j sums bytes 4j..4j+3, the same grouping as VNNI's
// dpbusd. 16 ymm registers: 4 tokens × 2 rows = 8 accumulators leaves room for the row blocks, their absolute
// values, and one activation block; one token streams 4 rows for more independent FMA chains at decode.
struct YmmAvx2 {
  static __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
  static constexpr bool kVnni = false;
  static constexpr int kTileTokens = 4;
  static constexpr int rows_per_tile(int n_tokens) { return n_tokens >= 3 ? 2 : 4; }
};

// The 256-bit VNNI forms (YmmVnni, and the one-token tiles and their helpers in the family headers): in the files
// compiled for AVX-512 VNNI, and in the emulated AVX-512 test build.
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(TESSERA_AVX512_EMULATED)
#define TESSERA_YMM_VNNI 1
#endif

#ifdef TESSERA_YMM_VNNI
// AVX-512 VNNI: lane j = Σ u[4j+i]·s[4j+i] in exact int32, like the AVX2 maddubs + madd pair (which never
// saturates for our operands), so both ISA levels give the same integer sums; 32 registers take 4 rows a tile.
struct YmmVnni {
  static __m256i dot_u8s8(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
  // acc + dot_u8s8(u, s) in one instruction, for tiles whose AVX2 form sums in int16 first (tiles with
  // `if constexpr (Isa::kVnni)`).
  static __m256i dpbusd(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
  static constexpr bool kVnni = true;
  static constexpr int kTileTokens = 4;
  static constexpr int rows_per_tile(int) { return 4; }
};

// s plus the dot products of q's byte quadruples with the 4 bytes at x, broadcast from memory inside the
// instruction (EVEX embedded broadcast; GCC 12 would load it with a separate vpbroadcastd).
TESSERA_INLINE inline __m256i dpbusd_broadcast_ymm(__m256i s, __m256i q, const int8_t* x) {
#ifdef TESSERA_AVX512_EMULATED
  int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_dpbusd_epi32(s, q, _mm256_set1_epi32(v));
#else
  using Bytes4 = int32_t __attribute__((may_alias));  // the int8 activations, read 4 at a time
  asm("vpdpbusd %2%{1to8%}, %1, %0" : "+v"(s) : "v"(q), "m"(*reinterpret_cast<const Bytes4*>(x)));
  return s;
#endif
}
#endif

// ---- small helpers ------------------------------------------------------------------------------------------

inline float half_to_float(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Decode streams weights from memory at one read per byte, and the loads of a tile stall until their lines
// arrive: without help the cores compute and wait in turn (time per byte ~ 1/compute + 1/bandwidth). Software
// prefetch far ahead keeps enough lines in flight to overlap the two. The distance was measured (2 threads, a
// 2048x5632 matrix streamed from a ring larger than L3, Zen 3): Q8_0 decode 19.5 GB/s at 1 KiB, 28-30 GB/s at
// 8-64 KiB, of ~33 GB/s measured read bandwidth; F16 24 -> 33 GB/s. Rows are contiguous, so the address lands
// in the rows a tile will read a few tiles later. Prefetching past a row's or the matrix's end is harmless.
// Always inlined: GCC 12 judged this wrapper free of side effects and dropped its calls from an always_inline
// caller (group_block), which left the interleaved kernels without prefetches (Q6_Kx8 at 1 token streamed
// 25-30 GOP/s instead of 66-73).
constexpr int kPrefetchBytes = 16384;
TESSERA_INLINE inline void prefetch(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

inline float max_f(float a, float b) { return a > b ? a : b; }

// Fixed-order horizontal sums (the float one: kernels/hsum_ymm_inl.h).

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// Four bytes at p broadcast to the 8 int32 lanes.
inline __m256i broadcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// ---- row tiles (WeightLayout::Rows) -------------------------------------------------------------------------
// Each tile computes NT tokens × NR rows with one accumulator per pair, then stores them. Loads of a weight
// block are shared by the NT tokens and loads of an activation block by the NR rows. Every tile is a function
// of its own (noinline, flatten): left to GCC, the I8 tile inlined into its family's driver ran 31-50 % slower
// at 4 to 128 tokens (1 thread, 512x2048, in cache) than it had inside the old all-types switch.

struct TileCtx {
  const MatmulArgs& a;
  int64_t t0, r0;
  // Q8_0 / Q4_0 in batches: the tile's weight block scales as fp32, row r at wd + r * wd_stride; null at decode.
  const float* wd = nullptr;
  int64_t wd_stride = 0;
  const uint8_t* wrow(int r) const { return a.w + static_cast<size_t>(r0 + r) * a.row_bytes; }
  float& out(int t, int r) const { return a.y[(t0 + t) * a.n_out + r0 + r]; }
};

// Tiles of Isa::rows_per_tile(NT) rows, then single rows, over [r_begin, r_end) for tokens [t0, t0 + NT).
// Tile::run<NT, NR>(const TileCtx&) computes one tile.
template <typename Isa, typename Tile, int NT>
void row_tiles_for_tokens(const MatmulArgs& a, int64_t t0, int64_t r_begin, int64_t r_end, const float* wd,
                          int64_t wd_stride) {
  constexpr int kNR = Isa::rows_per_tile(NT);
  // wd covers rows from r_begin on.
  auto ctx = [&](int64_t r) { return TileCtx{a, t0, r, wd ? wd + (r - r_begin) * wd_stride : nullptr, wd_stride}; };
  int64_t r = r_begin;
  for (; r + kNR <= r_end; r += kNR) Tile::template run<NT, kNR>(ctx(r));
  for (; r < r_end; ++r) Tile::template run<NT, 1>(ctx(r));
}

// Rows [row_begin, row_end) of a Rows-layout matrix for every token. Rows are taken in chunks whose weights stay
// in L1/L2 while every token tile passes over them: the weights are read from memory once per call, the
// (smaller) activations once per chunk from cache. block32_bytes: Q8_0 / Q4_0 blocks (which start with an fp16
// scale) of that many bytes, whose scales a batch converts once per chunk for all of its token tiles; 0 for the
// other types.
template <typename Isa, typename Tile>
void row_tiles(const MatmulArgs& a, int64_t row_begin, int64_t row_end, int block32_bytes) {
  constexpr int kTileTokens = Isa::kTileTokens;
  int64_t chunk = static_cast<int64_t>(48 * 1024 / (a.row_bytes + 1)) / 4 * 4;
  chunk = chunk < 4 ? 4 : chunk > 256 ? 256 : chunk;
  const int64_t nb = a.n_in / 32;
  thread_local std::vector<float> wd_scratch;  // grown on demand and kept: steady state allocates nothing
  float* wd = nullptr;
  if (block32_bytes != 0 && a.n_tokens > 1) {
    if (wd_scratch.size() < static_cast<size_t>(chunk * nb)) wd_scratch.resize(static_cast<size_t>(chunk * nb));
    wd = wd_scratch.data();
  }
  for (int64_t rc = row_begin; rc < row_end; rc += chunk) {
    const int64_t rce = rc + chunk < row_end ? rc + chunk : row_end;
    if (wd != nullptr) {
      for (int64_t r = rc; r < rce; ++r) {
        const uint8_t* row = a.w + static_cast<size_t>(r) * a.row_bytes;
        for (int64_t b = 0; b < nb; ++b) wd[(r - rc) * nb + b] = half_to_float(row + b * block32_bytes);
      }
    }
    int64_t t = 0;
    for (; t + kTileTokens <= a.n_tokens; t += kTileTokens)
      row_tiles_for_tokens<Isa, Tile, kTileTokens>(a, t, rc, rce, wd, nb);
    switch (a.n_tokens - t) {
      case 3: row_tiles_for_tokens<Isa, Tile, 3>(a, t, rc, rce, wd, nb); break;
      case 2: row_tiles_for_tokens<Isa, Tile, 2>(a, t, rc, rce, wd, nb); break;
      case 1: row_tiles_for_tokens<Isa, Tile, 1>(a, t, rc, rce, wd, nb); break;
      default: break;
    }
  }
}

// ---- interleaved tiles (WeightLayout::Interleaved8, kernels/interleave.h) ------------------------------------

// Block b of an interleaved group without requests: the K-quant tiles request its lines (prefetch_block_part)
// an eighth at each of the super-block's 8 steps, as their 512-bit tiles do (matmul_kquant_avx512.cpp). Against
// group_block's burst of 18 (Q4_K) or 27 (Q6_K) lines per super-block (2048x5632 from memory, 2 threads, Zen 5,
// µs, five alternations): Q6_Kx8 at 1 token 117-140 against 129-179, at 2 165-180 against 189-245; Q4_Kx8 at 1
// 89-112 against 97-147, at 4 276-297 against 282-373 (5632x2048: Q6_K 1-2 tokens 5-10 % less, Q4_K at 4 tokens
// 5-10 % more); the AVX2 level on the same machine level or faster at 1-4 tokens. Decode's tiles have since
// dropped the requests altogether (matmul_kquant_inl.h's q4_kx8_requests_ahead: measured on Zen 4), and so
// have Q4_0x8's (matmul_q4_0_inl.h's q4_0x8_requests_ahead).
TESSERA_INLINE inline const uint8_t* group_block_unrequested(const MatmulArgs& a, int64_t group, int64_t b,
                                                             int block_bytes) {
  return a.w + static_cast<size_t>(group) * 8 * a.row_bytes + b * block_bytes;
}

// Block b of an interleaved group of 8 rows, with the bytes kPrefetchBytes further on requested.
TESSERA_INLINE inline const uint8_t* group_block(const MatmulArgs& a, int64_t group, int64_t b, int block_bytes) {
  const uint8_t* blk = group_block_unrequested(a, group, b, block_bytes);
  for (int line = 0; line < block_bytes; line += 64) prefetch(blk + kPrefetchBytes + line);
  return blk;
}

#ifdef TESSERA_YMM_VNNI
// One token through one interleaved group of 8 rows whose 32-value blocks start with the 8 rows' fp16 scales
// (Q8_0x8, Q4_0x8), with VNNI: the one-token tiles that read a thread's groups one after another, as one stream.
// block_sums(values, x, start) gives the 8 rows' exact int32 sums of the block whose values start at `values`,
// beginning from `start` = −kOffset·Σx (the offset that makes the weights unsigned); the fp32 epilogue is the
// other tiles' (fma(float(sum), d_w·d_x, acc) block by block), so the bits are theirs.
template <int kBlockBytes, int kOffset, typename BlockSums>
TESSERA_INLINE inline void one_token_scaled_blocks(const MatmulArgs& a, int64_t t0, int64_t group,
                                                   BlockSums&& block_sums) {
  const int64_t nb = a.n_in / 32;
  const int8_t* xq = a.xq.q + t0 * a.n_in;
  const int16_t* sums = a.xq.sum16 + t0 * nb * 2;
  const float* scales = a.xq.scale + t0 * nb;
  const uint8_t* blk = group_block_unrequested(a, group, 0, kBlockBytes);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, blk += kBlockBytes, xq += 32) {
    const __m256i start = _mm256_set1_epi32(-kOffset * (int32_t{sums[2 * b]} + sums[2 * b + 1]));
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)blk));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_sums(blk + 16, xq, start)),
                          _mm256_mul_ps(dw, _mm256_broadcast_ss(scales + b)), acc);
  }
  _mm256_storeu_ps(a.y + t0 * a.n_out + group * 8, acc);
}
#endif

// Share kPart of kParts of a kBlockBytes-long block's 64-byte lines: lines [kFirst, kEnd), the shares in order
// covering every line once. For the tiles that spread a block's requests over its steps (prefetch_block_part
// here, matmul_zmm_inl.h's prefetch_block).
template <int kBlockBytes, int kParts, int kPart>
struct LineShare {
  static_assert(0 <= kPart && kPart < kParts);
  static constexpr int kLines = (kBlockBytes + 63) / 64;
  static constexpr int kFirst = kLines * kPart / kParts, kEnd = kLines * (kPart + 1) / kParts;
};

// Requests share kPart of kParts of the lines kPrefetchBytes past the block at blk (kBlockBytes long).
template <int kBlockBytes, int kParts, int kPart>
TESSERA_INLINE inline void prefetch_block_part(const uint8_t* blk) {
  using Share = LineShare<kBlockBytes, kParts, kPart>;
  static_for<Share::kEnd - Share::kFirst>([&](auto line) TESSERA_INLINE {
    prefetch(blk + kPrefetchBytes + 64 * (Share::kFirst + line));
  });
}

// prefetch_block_part for a share `part` known only at run time (a tile looping over a block's steps).
template <int kBlockBytes, int kParts>
TESSERA_INLINE inline void prefetch_block_part_at(const uint8_t* blk, int part) {
  with_constant<kParts>(part, [&](auto p) TESSERA_INLINE { prefetch_block_part<kBlockBytes, kParts, p>(blk); });
}

// Whether a kernel type takes its activations with one scale per 256-value super-block (ActBlocks::Block256).
constexpr bool takes_block256_acts(KernelType type) { return type == KernelType::Q4_K || type == KernelType::Q4_Kx8; }

// Token t0 + t's quantized activations, for t < NT: the pointers every interleaved tile starts from.
template <int NT>
struct TileActs {
  const int8_t* q[NT];
  const int8_t* q_abs[NT];   // not with Block256
  const float* scale[NT];    // one per 32-value block, or per 256-value super-block (Q4_K)
  const int16_t* sum16[NT];  // one per 16 values (Block32)
  const int16_t* sum32[NT];  // one per 32 values (Q4_K)

  TESSERA_INLINE TileActs(const MatmulArgs& a, int64_t t0) {
    const int64_t nb = a.n_in / 32, n_scales = takes_block256_acts(a.type) ? nb / 8 : nb;
    // Arrays a form does not fill are null, and stay null (no offset applied to a null pointer).
    auto at = [](auto* base, int64_t offset) { return base == nullptr ? base : base + offset; };
    static_for<NT>([&](auto t) {
      q[t] = a.xq.q + (t0 + t) * a.n_in;
      q_abs[t] = at(a.xq.q_abs, (t0 + t) * a.n_in);
      scale[t] = a.xq.scale + (t0 + t) * n_scales;
      sum16[t] = at(a.xq.sum16, (t0 + t) * nb * 2);
      sum32[t] = at(a.xq.sum32, (t0 + t) * nb);
    });
  }
};

// Tokens per interleaved tile: 4, and for the wide families (Q8_0x8 and I8x8) a group of 8 rows without a partner
// (an odd group count in a thread's rows) takes 8 tokens a tile: each weight vector's |w| is computed once for
// all of them, and the 8 int32 accumulators (8 more fp32 ones for Q8_0, which GCC spills once a block) still
// leave registers for the weights. 1-core, in-cache 512-token products ran 7 % faster than with 4-token tiles
// (Q8_0 112 → 119 GOP/s, I8 126 → 133). The 4-bit and 6-bit kinds keep 4: their int16 and fp32 accumulators and
// bit masks would not fit with 8.
constexpr int kInterleavedTileTokens = 4;
constexpr int kWideTileTokens = 8;

// Families with pair tiles (Q8_0x8, I8x8, Q4_0x8, Q4_Kx8) take batches two groups (16 rows) by 4 tokens
// (Family::pair_tile): one activation broadcast per two products. 512-token prefills of Q8_0 and I8 ran 2-23 %
// faster at model level than with 8-token single-group tiles; Q4_0x8 and Q4_Kx8 products of 16 and 512 tokens
// 1.23-1.29x and 1.09-1.26x faster than with their 4-token single-group tiles (Zen 3, docs/performance.md).
constexpr int kPairTileTokens = 4;

// Tiles of 3, 2 or 1 tokens for the last tokens [t, te) of a block in group g. Family::tile<NT>(a, t0, group)
// computes one group of 8 rows for NT tokens.
template <typename Family>
inline void remainder_tiles(const MatmulArgs& a, int64_t t, int64_t te, int64_t g) {
  switch (te - t) {
    case 3: Family::template tile<3>(a, t, g); break;
    case 2: Family::template tile<2>(a, t, g); break;
    case 1: Family::template tile<1>(a, t, g); break;
    default: break;
  }
}

// Token blocks outside, groups of 8 rows inside: a block's quantized activations (|x| and x, ~192 KiB) stay in
// L2 while every group passes over them, and a group's weights (a few tens of KiB) stay in L1 across the block's
// tiles. With all tokens in one pass, a long prompt's activations (2 MiB for 512 tokens of 2048) would stream
// from L3 once per group: 512-token products ran ~8% slower than 32-token ones per token. Weights are re-read
// once per block, from L3 for a matrix that fits there. Tiles give the same bits wherever they start.
// Family: tile<NT>(a, t0, group) for NT ≤ 4 (and up to 8 if kWide), and if kPairs, pair_tile<NT>(a, t0, group)
// for groups `group` and `group + 1`.
template <typename Family>
void interleaved_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr bool kWide = Family::kWide;
  const int64_t block =
      std::max<int64_t>(kWideTileTokens, (192 << 10) / (2 * a.n_in) / kWideTileTokens * kWideTileTokens);
  for (int64_t tb = 0; tb < a.n_tokens; tb += block) {
    const int64_t te = std::min(a.n_tokens, tb + block);
    int64_t g = row_begin / 8;
    if constexpr (Family::kPairs) {
      if (te - tb >= kPairTileTokens) {
        for (; g + 2 <= row_end / 8; g += 2) {
          int64_t t = tb;
          for (; t + kPairTileTokens <= te; t += kPairTileTokens) Family::template pair_tile<kPairTileTokens>(a, t, g);
          remainder_tiles<Family>(a, t, te, g);
          remainder_tiles<Family>(a, t, te, g + 1);
        }
      }
    }
    for (; g < row_end / 8; ++g) {
      int64_t t = tb;
      if constexpr (kWide)
        for (; t + kWideTileTokens <= te; t += kWideTileTokens) Family::template tile<kWideTileTokens>(a, t, g);
      for (; t + kInterleavedTileTokens <= te; t += kInterleavedTileTokens)
        Family::template tile<kInterleavedTileTokens>(a, t, g);
      remainder_tiles<Family>(a, t, te, g);
    }
  }
}

// ---- signed byte products of 8 interleaved rows (Q8_0x8 and I8x8) -------------------------------------------

// s32[g][t] += the int32 lanes of block b's products for NG groups of 8 rows (1, or 2 from blk[0]) and NT tokens:
// the 8 weight vectors of group g load from blk[g] + offset + 32·j, and vector j holds values 4j..4j+3 of its 8
// rows, multiplied with token t's 4 activation bytes there, broadcast. Signed × signed through vpmaddubsw's
// unsigned × signed: one token of one group takes |x| · (w with x's sign), both broadcasts loaded; otherwise
// each weight vector's |w| serves every token, each token takes (x with w's sign), and with two groups each
// broadcast serves both groups' vectors. All give the same exact integers (|w|, |x| ≤ 127: no saturation), so
// an element has the same bits whatever tile computes it.
template <int NT, int NG>
TESSERA_INLINE inline void block_products(const uint8_t* const (&blk)[NG], int offset, const TileActs<NT>& x,
                                          int64_t b, __m256i (&s32)[NG][NT]) {
  const __m256i ones = _mm256_set1_epi16(1);
  static_for<8>([&](auto j) {
    const int64_t i = b * 32 + 4 * j;
    __m256i v[NG];
    static_for<NG>([&](auto g) { v[g] = _mm256_loadu_si256((const __m256i*)(blk[g] + offset + 32 * j)); });
    if constexpr (NT == 1 && NG == 1) {
      const __m256i signed_w = _mm256_sign_epi8(v[0], broadcast32(x.q[0] + i));
      s32[0][0] = _mm256_add_epi32(s32[0][0],
                                   _mm256_madd_epi16(_mm256_maddubs_epi16(broadcast32(x.q_abs[0] + i), signed_w), ones));
      keep_in_register(s32[0][0]);
    } else {
      __m256i abs_w[NG];
      static_for<NG>([&](auto g) { abs_w[g] = _mm256_abs_epi8(v[g]); });
      static_for<NT>([&](auto t) {
        const __m256i xv = broadcast32(x.q[t] + i);
        static_for<NG>([&](auto g) {
          const __m256i signed_x = _mm256_sign_epi8(xv, v[g]);
          s32[g][t] = _mm256_add_epi32(s32[g][t], _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w[g], signed_x), ones));
          keep_in_register(s32[g][t]);
        });
      });
    }
  });
}

}  // namespace
}  // namespace tessera::kernels
