// BF16 products (WeightMatrix::bf16_products): BF16 weights in panels of 32 rows (WeightLayout::Panel32) times
// activations rounded to bf16, on AVX-512 BF16's vdpbf16ps, which multiplies 16 lanes of bf16 pairs and adds
// both products to an fp32 lane: twice the multiply-adds per instruction of the fp32 FMA the float panels use.
//
// vdpbf16ps wants each lane to hold one row's values at k and k + 1: the pair words a BF16 panel stores
// (interleave.h), 128 bytes a pair, so rows 0-15 and 16-31 of pair p are two loads as they lie, with the sums in
// row order. (Panels of slices, one k's 32 rows side by side, took a vpunpcklwd and a vpunpckhwd per pair and a
// permutation of the sums: one-token products of 65536 × 2048 from memory read 25.3 GB/s against 28.2 without
// them, Intel Xeon, 2 threads.) The activations are rounded once per call (round_to_bf16), so each token's row
// of bf16 is a row of bf16 pairs: the 32-bit word p holds x[2p] in its low half and x[2p + 1] in its high half,
// the order the weights pair them. An odd n_in pairs the last k (a slice of its own) with a zero weight and a
// zero activation. Batches of more than kPanelDirectTokens tokens get the
// pairs in the order the packed tiles read them (tile_order.h), written once by the rounding for every thread and
// every matrix that shares the input.
//
// Batch invariance: every element is one chain over the pairs in order from zero, acc = vdpbf16ps(acc, w, x)
// for p = 0, 1, ..., whatever the tile, the token count or the thread split; a prompt's chunks of k leave their
// sums in y and the next chunk loads them back unchanged.
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "kernels/bf16_tile_layout.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_ymm_inl.h"
#include "kernels/matmul_zmm_inl.h"
#include "kernels/static_for.h"
#include "kernels/tile_columns_zmm_inl.h"
#include "kernels/tile_order.h"

namespace tessera::kernels::avx512 {
namespace {

constexpr int64_t kPairBytes = kPanelRows * 4;  // one pair of k of a panel: 32 pair words

// Pairs per chunk of a prompt's rows, and tokens per block. A panel's chunk of weights (up to 256 KiB) stays in
// L2 while the block's tiles pass over it, each tile reading its own chunk of pairs (up to 96 KiB) once per panel.
// Long chunks start and store each tile's sums less often, and large blocks read the weights from memory fewer
// times: per product on Zen 4 (128 and 512 tokens, 2 threads, three alternations), 2048 pairs and 180 tokens gave
// 432-452 GFLOP/s against 380-429 for the constants before, 256 pairs and 120 tokens, and 396-443
// for 1024 pairs; 1408-2816 pairs measured alike on the 2816 pairs of a 5632-long row, as did 240 tokens.
constexpr int64_t kPairChunk = 2048;
// 24 sums, two pair registers and a broadcast of the 32 registers;
// 14 tokens (28 sums) measured no different in three alternations (Zen 4, TinyLlama BF16 prefill).
constexpr int kPackedTokens = 12;
constexpr int64_t kTokenBlock = 180;

// Larger batches keep their pairs in the packed tiles' order (tile_order.h).
TileOrder pair_order(int64_t n_tokens, int64_t n_pairs) {
  return TileOrder{n_tokens, n_pairs, kPairChunk, kTokenBlock, kPackedTokens};
}

TESSERA_INLINE inline __m512 dot_pairs(__m512 acc, __m512i w, __m512i x) {
  return _mm512_dpbf16_ps(acc, std::bit_cast<__m512bh>(w), std::bit_cast<__m512bh>(x));
}

// A pair's words of rows 0-15 and 16-31 (at p).
TESSERA_INLINE inline void load_pairs(const uint8_t* p, __m512i& lo, __m512i& hi) {
  lo = _mm512_loadu_si512(p);
  hi = _mm512_loadu_si512(p + 64);
}

// The last k of an odd row (its slice at p), paired with zero.
TESSERA_INLINE inline void load_last(const uint8_t* p, __m512i& lo, __m512i& hi) {
  lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)));
}

// The panel of rows [r0, r0 + 32) times NT tokens from t0 over the pairs [p0, p0 + n_p). Token t's pair p is
// x[(p − p0)·NT + t] when the activations are packed for the tile (kPacked), else x[(t0 + t)·n_pairs + p] in
// the call's rounded rows (a.x_bf16). `first`: the chains start here, else they continue from y. `ahead`, if
// not null: the next panel, whose same pairs are requested while this one computes (packed only; the direct
// tile requests its own panel kPrefetchBytes ahead): the block's only tile requests every pair into L1; of
// several, each requests its share [share_begin, share_end) into L2, spread evenly over its pass. With the first
// tile alone requesting them (into L1), the memory idled while the later tiles computed: BF16 prefill 512
// (TinyLlama shape, Zen 4, six alternations of `bench --quick`) 168-180 tok/s against 173-185 with shares,
// batch 16 121-153 against 131-171, batch 32 151-158 against 166-182. The shares are in proportion to the
// tiles' tokens: equal shares (every n-th pair to each tile) had the narrow last tile, a fraction of the others'
// time, request as much as they did, faster than memory delivers (5632x2048 from memory, 2 threads, Zen 5, µs,
// four alternations: at 16 tokens, tiles of 12 and 4, 552-610 against 688-915; at 13, 24 and 32 tokens
// 495, 659 and 992 against 842, 1008 and 1277 in the steadiest round; 5-8 tokens, one tile, unchanged).
template <int NT, bool kPacked>
__attribute__((noinline, flatten)) void bf16_tile(const MatmulArgs& a, int64_t r0, int64_t t0, const uint32_t* x,
                                                  int64_t p0, int64_t n_p, bool first, const uint8_t* ahead,
                                                  int64_t share_begin = 0, int64_t share_end = 0,
                                                  bool only_tile = true) {
  const int64_t n_pairs = (a.n_in + 1) / 2;
  const uint8_t* panel = a.w + size_t(r0 / kPanelRows) * kPanelRows * a.row_bytes;
  auto x_at = [&](int64_t p, int t) TESSERA_INLINE {
    return kPacked ? x[(p - p0) * NT + t] : x[(t0 + t) * n_pairs + p];
  };
  __m512 lo[NT], hi[NT];
  static_for<NT>([&](auto t) TESSERA_INLINE {
    if (first) {
      lo[t] = hi[t] = _mm512_setzero_ps();
    } else {
      const float* y = a.y + (t0 + t) * a.n_out + r0;
      lo[t] = _mm512_loadu_ps(y);
      hi[t] = _mm512_loadu_ps(y + 16);
    }
  });
  auto step = [&](int64_t p, __m512i wlo, __m512i whi) TESSERA_INLINE {
    keep_in_zmm(wlo);
    keep_in_zmm(whi);
    static_for<NT>([&](auto t) TESSERA_INLINE {
      const __m512i xv = _mm512_set1_epi32(int32_t(x_at(p, t)));
      lo[t] = dot_pairs(lo[t], wlo, xv);
      hi[t] = dot_pairs(hi[t], whi, xv);
    });
  };
  const int64_t p_end = p0 + n_p, full_end = std::min(p_end, a.n_in / 2);
  const int64_t share = share_end - share_begin;
  int64_t credit = 0, requested = share_begin;
  for (int64_t p = p0; p < full_end; ++p) {
    const uint8_t* w = panel + p * kPairBytes;
    if constexpr (kPacked) {
      if (ahead == nullptr) {
      } else if (only_tile) {  // a block of one tile: as measured before the shares, into L1
        const char* next = reinterpret_cast<const char*>(ahead + p * kPairBytes);
        _mm_prefetch(next, _MM_HINT_T0);
        _mm_prefetch(next + 64, _MM_HINT_T0);
      } else if ((credit += share) >= n_p) {
        credit -= n_p;
        const char* next = reinterpret_cast<const char*>(ahead + requested++ * kPairBytes);
        _mm_prefetch(next, _MM_HINT_T1);
        _mm_prefetch(next + 64, _MM_HINT_T1);
      }
    } else {
      prefetch(w + kPrefetchBytes);
      prefetch(w + kPrefetchBytes + 64);
    }
    __m512i wlo, whi;
    load_pairs(w, wlo, whi);
    step(p, wlo, whi);
  }
  if (full_end < p_end) {  // n_in odd: the last pair
    __m512i wlo, whi;
    load_last(panel + full_end * kPairBytes, wlo, whi);
    step(full_end, wlo, whi);
  }
  static_for<NT>([&](auto t) TESSERA_INLINE {
    float* y = a.y + (t0 + t) * a.n_out + r0;
    _mm512_storeu_ps(y, lo[t]);
    _mm512_storeu_ps(y + 16, hi[t]);
  });
}

// Decode and small batches: every panel of the thread's rows, the activations read where round_to_bf16 left
// them.
template <int NT>
void bf16_rows_direct(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  const int64_t n_pairs = (a.n_in + 1) / 2;
  for (int64_t r = row_begin; r < row_end; r += kPanelRows)
    bf16_tile<NT, false>(a, r, 0, a.x_bf16, 0, n_pairs, true, nullptr);
}

void bf16_rows_packed(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr int NT = kPackedTokens;
  const TileOrder layout = pair_order(a.n_tokens, (a.n_in + 1) / 2);
  const int64_t n_pairs = layout.n_values, chunk = layout.chunk();
  for (int64_t tb = 0; tb < a.n_tokens; tb += layout.block_tokens) {
    const int64_t te = tb + layout.block(tb);
    for (int64_t p0 = 0; p0 < n_pairs; p0 += chunk) {
      const int64_t n_p = std::min(chunk, n_pairs - p0);
      for (int64_t r = row_begin; r < row_end; r += kPanelRows) {
        // The next panel (past row_end another thread's, which is harmless to request).
        const uint8_t* ahead = r + kPanelRows < a.n_out ? a.w + size_t(r / kPanelRows + 1) * kPanelRows * a.row_bytes
                                                        : nullptr;
        const int64_t n_block = te - tb;
        for_each_tile<NT>(tb, te, [&](auto nt, int64_t t) {
          constexpr int64_t kNT = decltype(nt)::value;
          const int64_t share_begin = p0 + n_p * (t - tb) / n_block, share_end = p0 + n_p * (t - tb + kNT) / n_block;
          bf16_tile<kNT, true>(a, r, t, a.x_bf16 + layout.tile_at(t, p0), p0, n_p, p0 == 0, ahead, share_begin,
                               share_end, n_block <= NT);
        });
      }
    }
  }
}

// fp32 to bf16, rounded to nearest even (NaN stays a NaN): core/fp16.h's fp32_to_bf16 on 16 lanes.
TESSERA_INLINE inline __m256i round_16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i bias = _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

// 32 values from x, the pairs of the first n_floats (the rest zero): 16 words of bf16 pairs.
TESSERA_INLINE inline __m512i round_pairs(const float* x, int64_t n_floats) {
  __m512 lo, hi;
  if (n_floats >= 32) {
    lo = _mm512_loadu_ps(x);
    hi = _mm512_loadu_ps(x + 16);
  } else {
    const int64_t n_lo = std::min<int64_t>(n_floats, 16), n_hi = n_floats - n_lo;
    lo = _mm512_maskz_loadu_ps(__mmask16((1u << n_lo) - 1), x);
    hi = _mm512_maskz_loadu_ps(__mmask16((1u << n_hi) - 1), x + 16);
  }
  return _mm512_inserti64x4(_mm512_zextsi256_si512(round_16(lo)), round_16(hi), 1);
}

// Token t's pairs into the tiles' order, 16 at a time, scattered at its tile's stride: for the tokens of a tile
// that the thread's token range splits.
void round_token_scattered(const float* x, int64_t n_in, const TileOrder& layout, int64_t t, uint32_t* out) {
  const float* row = x + t * n_in;
  layout.for_each_chunk(t, [&](int64_t p0, int64_t p_end, int64_t at, int64_t nt) {
    const __m512i stride = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(int32_t(nt)));
    for (int64_t p = p0; p < p_end; p += 16) {
      const __m512i v = round_pairs(row + 2 * p, n_in - 2 * p);
      const int64_t n = std::min<int64_t>(16, p_end - p);
      _mm512_mask_i32scatter_epi32(out + at + (p - p0) * nt, __mmask16((1u << n) - 1), stride, v, 4);
    }
  });
}

// The whole tile of tokens [tt, tt + nt) into the tiles' order, 16 pairs at a time (tile_columns_zmm_inl.h).
void round_tile_transposed(const float* x, int64_t n_in, const TileOrder& layout, int64_t tt, int64_t nt,
                           uint32_t* out) {
  layout.for_each_chunk(tt, [&](int64_t p0, int64_t p_end, int64_t at, int64_t) {
    for (int64_t p = p0; p < p_end; p += 16) {
      const auto row = [&](int64_t i) { return round_pairs(x + (tt + i) * n_in + 2 * p, n_in - 2 * p); };
      store_tile_columns(nt, std::min<int64_t>(16, p_end - p), row, out + at + (p - p0) * nt);
    }
  });
}

// Tokens [t_begin, t_end) into the tiles' order: whole tiles transposed in registers, the tokens of a tile the
// range splits (between two threads) one by one.
void round_packed(const float* x, int64_t n_in, const TileOrder& layout, int64_t t_begin, int64_t t_end,
                  uint32_t* out) {
  static_assert(kPackedTokens <= 16);
  layout.for_each_tile_in(
      t_begin, t_end, [&](int64_t tt, int64_t nt) { round_tile_transposed(x, n_in, layout, tt, nt, out); },
      [&](int64_t t) { round_token_scattered(x, n_in, layout, t, out); });
}

}  // namespace

void round_to_bf16(const float* x, int64_t n_in, int64_t n_tokens, int64_t t_begin, int64_t t_end,
                   uint32_t* pairs) {
  const int64_t stride = n_in + (n_in & 1);
  if (n_tokens > kPanelDirectTokens) {
    return round_packed(x, n_in, pair_order(n_tokens, stride / 2), t_begin, t_end, pairs);
  }
  for (int64_t t = t_begin; t < t_end; ++t) {
    const float* row = x + t * n_in;
    // Written only by vector stores, which may alias the uint32_t pairs.
    uint16_t* o = reinterpret_cast<uint16_t*>(pairs + t * (stride / 2));
    int64_t i = 0;
    for (; i + 16 <= n_in; i += 16) _mm256_storeu_si256((__m256i*)(o + i), round_16(_mm512_loadu_ps(row + i)));
    if (i < stride) {  // the odd row's pad lane loads, and stores, a zero
      const __m512 last = _mm512_maskz_loadu_ps(__mmask16((1u << (n_in - i)) - 1), row + i);
      _mm256_mask_storeu_epi16(o + i, __mmask16((1u << (stride - i)) - 1), round_16(last));
    }
  }
}

void round_to_bf16_tiles(const float* x, int64_t n_in, int64_t n_tokens, int64_t t_begin, int64_t t_end,
                         uint32_t* pairs) {
  const Bf16Tiles tiles(n_in, n_tokens);
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t s = 0; s < tiles.steps; ++s) {
      const int64_t k = s * 2 * Bf16Tiles::kStepPairs;
      _mm512_storeu_si512(pairs + tiles.row_at(t, s), round_pairs(x + t * n_in + k, n_in - k));
    }
  }
  if (t_end < n_tokens) return;
  for (int64_t t = n_tokens; t < tiles.padded_tokens(); ++t) {  // the last tile's rows past the batch
    for (int64_t s = 0; s < tiles.steps; ++s) _mm512_storeu_si512(pairs + tiles.row_at(t, s), _mm512_setzero_si512());
  }
}

void round_f16_to_bf16(uint8_t* data, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    uint8_t* p = data + 2 * i;
    _mm256_storeu_si256((__m256i*)p, round_16(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p))));
  }
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    uint8_t* p = data + 2 * i;
    _mm256_mask_storeu_epi16(p, m, round_16(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p))));
  }
}

void matmul_bf16_products_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  static_assert(kPanelDirectTokens == 4);  // round_to_bf16's row-by-row layout: the direct tiles below
  switch (args.n_tokens) {
    case 1: return bf16_rows_direct<1>(args, row_begin, row_end);
    case 2: return bf16_rows_direct<2>(args, row_begin, row_end);
    case 3: return bf16_rows_direct<3>(args, row_begin, row_end);
    case 4: return bf16_rows_direct<4>(args, row_begin, row_end);
    default: return bf16_rows_packed(args, row_begin, row_end);  // more than kPanelDirectTokens
  }
}

}  // namespace tessera::kernels::avx512
