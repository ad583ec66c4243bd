// AVX-512 float matmul kernels: F32, F16 and BF16 rows on 512-bit registers, and F32, F16, BF16 and FP8 panels
// (matmul_panel_inl.h) on zmm. Every call at this level (decode included) takes the 512-bit tiles: a row's
// reduction is defined by the 512-bit lanes here.
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cstdint>

#include "kernels/matmul_float_inl.h"
#include "kernels/matmul_kernels.h"
#include "kernels/matmul_panel_inl.h"
#include "kernels/matmul_ymm_inl.h"
#include "kernels/matmul_zmm_inl.h"
#include "kernels/static_for.h"
#include "kernels/tile_columns_zmm_inl.h"

namespace tessera::kernels::avx512 {
namespace {

// ---- float weights (F32, F16, BF16) on 512-bit registers ---------------------------------------------------
// 16 values converted to fp32 per step, FMA with fp32 activations. Every call at this ISA level (decode
// included) reduces an element the same way: 16 lane sums over the row in order, then a fixed tree (the two
// 256-bit halves added, then hsum), then the row's last n_in % 16 values in order; so results do not depend on
// the tile, the batch or the split.
struct F32LoadZmm {
  static __m512 load(const uint8_t* row, int64_t i) { return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i); }
  static float one(const uint8_t* row, int64_t i) { return F32Load::one(row, i); }
};
struct F16LoadZmm {
  static __m512 load(const uint8_t* row, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(row + 2 * i)));
  }
  static float one(const uint8_t* row, int64_t i) { return F16Load::one(row, i); }
};
struct BF16LoadZmm {
  static __m512 load(const uint8_t* row, int64_t i) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(row + 2 * i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  }
  static float one(const uint8_t* row, int64_t i) { return BF16Load::one(row, i); }
};

inline float hsum_zmm(__m512 v) {
  const __m512 high = _mm512_shuffle_f32x4(v, v, 0xee);  // lanes 8-15 moved down (extract warns on GCC 12)
  return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_castps512_ps256(high)));
}

// NT tokens × NR rows, NT·NR accumulators (at most 24 of the 32 registers, beside NR weight vectors and one
// activation vector).
template <typename Load, int NT, int NR>
__attribute__((noinline, flatten)) void tile_float_zmm(const MatmulArgs& a, int64_t t0, int64_t r0) {
  const int64_t n = a.n_in, nv = n / 16;
  __m512 acc[NT][NR];
  static_for<NT>([&](auto t) { static_for<NR>([&](auto r) { acc[t][r] = _mm512_setzero_ps(); }); });
  const float* x[NT];
  static_for<NT>([&](auto t) { x[t] = a.x + (t0 + t) * n; });
  const uint8_t* wr[NR];
  static_for<NR>([&](auto r) { wr[r] = a.w + static_cast<size_t>(r0 + r) * a.row_bytes; });
  for (int64_t i = 0; i < nv * 16; i += 16) {
    __m512 wv[NR];
    static_for<NR>([&](auto r) {
      // As in the 256-bit tiles: the address runs 4 bytes per value, ahead of 2-byte rows by a growing margin
      // (into the rows of later tiles); at one token this measured 262-300 us per 5632x2048 F16 product against
      // 346-439 with one prefetch per line at a fixed 16 KiB.
      prefetch(wr[r] + sizeof(float) * i + kPrefetchBytes);
      wv[r] = Load::load(wr[r], i);
    });
    static_for<NT>([&](auto t) {
      const __m512 xv = _mm512_loadu_ps(x[t] + i);
      static_for<NR>([&](auto r) { acc[t][r] = _mm512_fmadd_ps(wv[r], xv, acc[t][r]); });
    });
  }
  static_for<NT>([&](auto t) {
    static_for<NR>([&](auto r) {
      float sum = hsum_zmm(acc[t][r]);
      for (int64_t i = nv * 16; i < n; ++i) sum += Load::one(wr[r], i) * x[t][i];
      a.y[(t0 + t) * a.n_out + r0 + r] = sum;
    });
  });
}

constexpr int kFloatTileTokens = 4;
// One token streams 4 rows (8 measured slower at decode), two take 8, three or more 6.
constexpr int float_rows_per_tile(int n_tokens) { return n_tokens >= 3 ? 6 : n_tokens == 2 ? 8 : 4; }

template <typename Load, int NT>
void float_tiles_for_tokens(const MatmulArgs& a, int64_t t0, int64_t r_begin, int64_t r_end) {
  constexpr int kNR = float_rows_per_tile(NT);
  int64_t r = r_begin;
  for (; r + kNR <= r_end; r += kNR) tile_float_zmm<Load, NT, kNR>(a, t0, r);
  for (; r < r_end; ++r) tile_float_zmm<Load, NT, 1>(a, t0, r);
}

// Rows in chunks whose weights stay in L1/L2 while every token tile passes over them (as row_tiles).
template <typename Load>
void zmm_float_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  int64_t chunk = static_cast<int64_t>(48 * 1024 / (a.row_bytes + 1)) / 24 * 24;
  chunk = chunk < 24 ? 24 : chunk > 240 ? 240 : chunk;
  for (int64_t rc = row_begin; rc < row_end; rc += chunk) {
    const int64_t rce = rc + chunk < row_end ? rc + chunk : row_end;
    int64_t t = 0;
    for (; t + kFloatTileTokens <= a.n_tokens; t += kFloatTileTokens)
      float_tiles_for_tokens<Load, kFloatTileTokens>(a, t, rc, rce);
    switch (a.n_tokens - t) {
      case 3: float_tiles_for_tokens<Load, 3>(a, t, rc, rce); break;
      case 2: float_tiles_for_tokens<Load, 2>(a, t, rc, rce); break;
      case 1: float_tiles_for_tokens<Load, 1>(a, t, rc, rce); break;
      default: break;
    }
  }
}

// The float panel tiles on zmm (matmul_panel_inl.h: PV). A prompt's activations are packed 16 tokens to a tile; a tile
// of 13-16 tokens runs on one vector of rows at a time (16 accumulators; the panel's two halves in turn), so that each
// weight vector's conversion (F16's vcvtph2ps, BF16's widening, FP8's) feeds 16 FMAs, and a tile of up to 12 (a block's
// last) on two (24 accumulators: one vector over 12 tokens measured BF16 with fp32 products at 98 GFLOP/s against 106,
// F32 at 89-96 against 100-101, F16 at 101 and 115 against 106). 5632x2048 from L3, one thread, Zen 4, in GFLOP/s,
// against the former 2-vector × 12-token tiles (16 tokens as 12 + 4): F16 at 16 tokens 103-109 against 98-102, 128
// tokens 111-115 against 102-105, 512 tokens 106-114 against 100-104; BF16 (fp32 products) alike; FP8 114-116 against
// 84-85 at 16 tokens, 107-115 against 90-91 at 512; F32 (no conversion) level but for 16 tokens (104-106 against
// 94-103). 1-4 tokens take one panel per tile (panel_tile_direct), so a tile reads one stream of weights: 4 panels (8
// vectors) at one token, 3 at three and 2 at four took 15-30 % longer per 1-token product (F16, BF16, F32, FP8,
// TinyLlama's four shapes, 2 threads, Zen 5; the variants interleaved call by call in one process), 5-20 % at 2-4
// tokens. Likely in part because each stream requests its line kPrefetchBytes ahead into L1 and 4 streams' 16 KiB
// windows exceed Zen 5's 48 KiB L1D: 4 streams with 4 KiB windows were 7 % faster than with 16 KiB, yet still slower
// than one stream.
struct PanelZmm {
  using V = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kPackedRows = 32, kPackedTokens = 16, kMaxAccumulators = 24;
  static constexpr int packed_vectors(int n_tokens) { return n_tokens <= 12 ? 2 : 1; }
  // k per chunk and tokens per block of a prompt (matmul_panel_inl.h). Per F16 product on Zen 4 (128 and 512
  // tokens, three alternations), 2048 values and 180 tokens gave 196-208 GFLOP/s against 190-204 for the AVX2
  // tiles' 512 and 120 (which keep a block's chunk in a Zen 3 L2); 1024 and 180 measured alike.
  static constexpr int64_t kChunk = 2048, kBlockTokens = 180;
  static constexpr int direct_vectors(int) { return 2; }
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float f) { return _mm512_set1_ps(f); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V load_f32(const uint8_t* p) { return _mm512_loadu_ps(p); }
  static V load_f16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static V load_bf16(const uint8_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  // The even k's weights (low halves) or the odd k's (high halves) of BF16's pair words (interleave.h), loaded
  // as floats.
  static V bf16_low(V pairs) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(pairs), 16)); }
  static V bf16_high(V pairs) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(pairs), _mm512_set1_epi32(int32_t(0xffff0000u))));
  }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  // 32 FP8 E4M3 bytes (two vectors' rows) as their values · 2^-8, fp16_bits_of_fp8 on a whole zmm of words.
  static void load_fp8_scaled_pair(const uint8_t* p, V& lo, V& hi) {
    const __m512i h = fp16_bits_of_fp8(_mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
    lo = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  }
  // 16 FP8 E4M3 bytes (one vector's rows) as their values · 2^-8.
  static V load_fp8_scaled(const uint8_t* p) {
    const __m256i h = fp16_bits_of_fp8(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    return _mm512_cvtph_ps(h);
  }
  static void pin(V& v) { keep_in_zmm(v); }
};

}  // namespace

// Whole tiles of tokens 16 values at a time through registers (tile_columns_zmm_inl.h); the tokens of a tile a
// thread boundary splits one store per value (pack_panel_tokens).
void pack_panel_acts(const float* x, int64_t n_in, int64_t n_tokens, int64_t t_begin, int64_t t_end, float* out) {
  static_assert(PanelZmm::kPackedTokens <= 16);
  const TileOrder order = panel_order<PanelZmm>(n_tokens, n_in);
  // `words` is written only through the masked vector stores, which may alias the floats.
  uint32_t* words = reinterpret_cast<uint32_t*>(out);
  const auto whole = [&](int64_t tt, int64_t nt) {
    order.for_each_chunk(tt, [&](int64_t k0, int64_t k_end, int64_t at, int64_t) {
      for (int64_t k = k0; k < k_end; k += 16) {
        const int64_t n = std::min<int64_t>(16, k_end - k);
        const auto row = [&](int64_t i) {
          return _mm512_castps_si512(_mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), x + (tt + i) * n_in + k));
        };
        store_tile_columns(nt, n, row, words + at + (k - k0) * nt);
      }
    });
  };
  order.for_each_tile_in(t_begin, t_end, whole,
                         [&](int64_t t) { pack_panel_tokens<PanelZmm>(x, n_in, n_tokens, t, t + 1, out); });
}

void matmul_float_rows(const MatmulArgs& args, int64_t row_begin, int64_t row_end) {
  switch (args.type) {
    case KernelType::F32: return zmm_float_rows<F32LoadZmm>(args, row_begin, row_end);
    case KernelType::F16: return zmm_float_rows<F16LoadZmm>(args, row_begin, row_end);
    case KernelType::BF16: return zmm_float_rows<BF16LoadZmm>(args, row_begin, row_end);
    default: return panel_matmul_rows<PanelZmm>(args, row_begin, row_end);
  }
}

}  // namespace tessera::kernels::avx512
