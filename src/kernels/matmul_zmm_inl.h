// 512-bit batch tiles for the interleaved integer types: the helpers and drivers every family shares, and the
// tile of Q8_0x8, Q4_0x8 and I8x8 (the K-quants' tiles are in matmul_kquant_avx512.cpp). For the *_avx512.cpp
// kernel files only; anonymous namespace, for the reason matmul_ymm_inl.h gives.
//
// One zmm register holds the same 4 values of two interleaved groups (16 rows, one int32 lane each): vector Vj
// of group g in the low half and Vj of group g + 1 in the high half. A tile is NZ such registers (16 or 32
// rows) by NT tokens; each token's 4 activation bytes are broadcast once and serve all NZ registers, and each
// weight register serves all NT tokens.
//
// VNNI's vpdpbusd multiplies unsigned by signed bytes and adds each 4 products into an int32 lane, with no int16
// step and no saturation. AVX-512 has no 512-bit vpsignb, so signed weights take the offset trick instead of
// AVX2's sign trick: w ^ 0x80 is w + 128 as an unsigned byte, and Σ (w + 128)·x = Σ w·x + 128·Σ x. The
// accumulator starts at −128·Σx of the token (from the activations' 16-value sums, or their row sum for I8),
// shared by every row, so the lanes end at Σ w·x exactly (int32 additions wrap, and the true sum fits). Q4_0's
// nibbles are unsigned already; their offset of 8 starts the accumulator at −8·Σx.
//
// Batch invariance: every lane holds the same exact integer block sum as the 256-bit tiles (tile_q8_0x8,
// tile_q4_0x8, tile_i8x8, which serve the tokens a batch leaves over and decode), and the fp32 epilogue is the
// same per-lane sequence (convert, multiply d_w by d_x, fused multiply-add; for I8 one multiply by
// row_scale · x_scale), so a result has the same bits whichever tile computes it.
#pragma once

#if (!defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VNNI__)) && !defined(TESSERA_AVX512_EMULATED)
#error "matmul_zmm_inl.h is for files compiled with AVX-512 F/BW and VNNI (*_avx512.cpp)"
#endif

#include <algorithm>

#include "kernels/column_shares.h"
#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels {
namespace {

// A register of 16 rows: bytes [0, 32) from group g's vector at p, bytes [32, 64) from group g + 1's at p + stride
// (a masked broadcast load merges the upper half: two loads, no shuffle).
TESSERA_INLINE inline __m512i load_group_pair(const uint8_t* p, size_t stride) {
  return _mm512_mask_broadcast_i64x4(_mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i*)p)), 0xf0,
                                     _mm256_loadu_si256((const __m256i*)(p + stride)));
}

// The 16 rows' fp16 block scales (8 at the start of each group's block) as fp32.
TESSERA_INLINE inline __m512 load_group_pair_scales(const uint8_t* p, size_t stride) {
  const __m256i h = _mm256_inserti128_si256(_mm256_zextsi128_si256(_mm_loadu_si128((const __m128i*)p)),
                                            _mm_loadu_si128((const __m128i*)(p + stride)), 1);
  return _mm512_cvtph_ps(h);
}

// 8 floats at lo, then 8 at hi.
TESSERA_INLINE inline __m512 load_ps_pair(const float* lo, const float* hi) {
  return _mm512_mask_broadcast_f32x8(_mm512_zextps256_ps512(_mm256_loadu_ps(lo)), 0xff00, _mm256_loadu_ps(hi));
}

// keep_in_register for zmm values: "v" admits all 32 vector registers ("x" only the first 16).
// (The emulated test build's 512-bit values are not registers: there it does nothing.)
template <typename Vector>
TESSERA_INLINE inline void keep_in_zmm([[maybe_unused]] Vector& v) {
#ifndef TESSERA_AVX512_EMULATED
  asm("" : "+v"(v));
#endif
}

// s plus the dot products of q's byte quadruples with the 4 bytes at x, broadcast from memory inside the
// instruction (EVEX embedded broadcast): GCC 12 loads the broadcast into a register with a separate
// vpbroadcastd for every _mm512_dpbusd_epi32(s, q, _mm512_set1_epi32(*x)), even when that register feeds only it.
TESSERA_INLINE inline __m512i dpbusd_broadcast(__m512i s, __m512i q, const int32_t* x) {
#ifdef TESSERA_AVX512_EMULATED
  return _mm512_dpbusd_epi32(s, q, _mm512_set1_epi32(*x));
#else
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(s) : "v"(q), "m"(*x));
  return s;
#endif
}

enum class ZmmKind { Q8_0, Q4_0, I8, Q4_K, Q6_K };

// Bytes of one block of one group of 8 rows (32 values; Q4_K and Q6_K: 256).
template <ZmmKind K>
constexpr int zmm_block_bytes() {
  switch (K) {
    case ZmmKind::Q8_0: return 272;
    case ZmmKind::Q4_0: return 144;
    case ZmmKind::I8: return 256;
    case ZmmKind::Q4_K: return 1152;
    case ZmmKind::Q6_K: return 1680;
  }
  return 0;
}

// Values per block: 32, or a 256-value super-block for the K-quants.
template <ZmmKind K>
constexpr int zmm_block_values() {
  return K == ZmmKind::Q4_K || K == ZmmKind::Q6_K ? 256 : 32;
}

// A token tile's activations, packed so that a tile addresses all of them from one pointer: with one pointer per
// token, the pointers of 4-8 tokens and of the weights ran out of general registers and the inner loop reloaded
// them from the stack. For NT tokens: dword d (bytes 4d..4d+3 of the row) of token t at q[d·NT + t]; per 32-value
// block b at [b·NT + t]: scale (d_x) and start, the accumulator's first value (−128·Σx for Q8_0, −8·Σx for Q4_0).
// Q4_K, per 256-value super-block sb: scale at [sb·NT + t], and start at [(4·sb + i)·NT + t], the 32-value sums of
// sub-blocks 2i and 2i + 1 as an int16 pair (its mins' vpmaddwd operand). Q6_K: scale per 32-value block, and
// per 16-value sub-block k at [k·NT + t] the start of its dot product, −32·Σx (the −32 offset of its values).
// I8: per token, scale[t] and start[t] = −128·Σx over the row.
struct PackedTile {
  const int32_t* q;
  const float* scale;
  const int32_t* start;
};

template <ZmmKind K>
constexpr bool per_row_acts() {
  return K == ZmmKind::I8;
}

// PackedTile's scale and start entries per token (the starts of Q6_K one per 16 values).
template <ZmmKind K>
constexpr int64_t packed_scales(int64_t n_in) {
  return per_row_acts<K>() ? 1 : K == ZmmKind::Q4_K ? n_in / 256 : n_in / 32;
}
template <ZmmKind K>
constexpr int64_t packed_starts(int64_t n_in) {
  return per_row_acts<K>() ? 1 : K == ZmmKind::Q6_K ? n_in / 16 : n_in / 32;
}

// Packs tokens [t0, t0 + nt) (PackedTile's layout for nt tokens) into q, scale and start.
template <ZmmKind K>
void pack_tile(const MatmulArgs& a, int64_t t0, int nt, int32_t* q, float* scale, int32_t* start) {
  const int64_t nb = a.n_in / 32;
  for (int t = 0; t < nt; ++t) {
    const int8_t* xq = a.xq.q + (t0 + t) * a.n_in;
    for (int64_t d = 0; d < nb * 8; ++d) std::memcpy(&q[d * nt + t], xq + 4 * d, 4);
    if constexpr (per_row_acts<K>()) {
      scale[t] = a.xq.scale[t0 + t];
      // In wrapping arithmetic: the lanes' true sums fit int32, the offset alone need not (NaN inputs).
      start[t] = static_cast<int32_t>(static_cast<uint32_t>(a.xq.row_sum[t0 + t]) * 0xffffff80u);
    } else if constexpr (K == ZmmKind::Q4_K) {
      const int64_t nsb = nb / 8;
      for (int64_t sb = 0; sb < nsb; ++sb) scale[sb * nt + t] = a.xq.scale[(t0 + t) * nsb + sb];
      for (int64_t p = 0; p < nb / 2; ++p) std::memcpy(&start[p * nt + t], a.xq.sum32 + (t0 + t) * nb + 2 * p, 4);
    } else {
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t i = (t0 + t) * nb + b;
        scale[b * nt + t] = a.xq.scale[i];
        const int16_t* sums = a.xq.sum16 + 2 * i;
        if constexpr (K == ZmmKind::Q6_K) {
          start[2 * b * nt + t] = -32 * int32_t{sums[0]};
          start[(2 * b + 1) * nt + t] = -32 * int32_t{sums[1]};
        } else {
          start[b * nt + t] = (K == ZmmKind::Q4_0 ? -8 : -128) * (int32_t{sums[0]} + sums[1]);
        }
      }
    }
  }
}

// The weight stream. A token block reads a tile column's weights from memory (or L3) once, in its first token
// tile, and its other tiles find them in L2. That first tile requests, in each of its 2·NZ group streams, the
// block kStreamAheadBytes further on (past the column's last block, the next column's first blocks): a few lines
// of every stream in flight, the reads overlapping the tile's compute.
// Before, every tile requested its share of the whole *next* column into L2 (70 KiB ahead for 32 Q8_0 rows of
// 2048), far more than memory keeps in flight: with one tile per column (2-6 tokens) a 5632x2048 Q8_0x8 product
// streamed from memory took 1.2-1.4x the 1-token (256-bit) time, now 1.0-1.1x; 8 tokens 1.9x, now 1.3x; 512
// tokens 3-9 % less time (2 threads, Zen 5; docs/performance.md, issue 20).
// With several token tiles to a column, the first tile alone waits on memory while the later ones compute from
// L2 with the memory idle: on a core whose int8 rate is about its share of the bandwidth's (Zen 4's
// double-pumped 512-bit units), a 16-token step cost about the stream plus the later tiles' compute. So the
// later tiles share out the next column among themselves, each requesting its share into L2 spread over its
// blocks: the memory works while they compute, and the next column's first tile finds its weights in L2.
// 5632x2048 products from memory, 2 threads, Zen 4, microseconds, with against without: Q8_0x8 at 16 tokens
// 583-614 against 677-798, at 8 417-439 against 487-504; I8x8 at 16 469-484 against 621; Q4_0x8 at 16 529-544
// against 569; 512 tokens 2-5 % less time; one tile per column (up to 6 tokens, Q8_0) unchanged.
constexpr int kStreamAheadBytes = 3072;

// The column a thread computes after the current one: its first block, and how many of its group streams exist
// (a narrower column, or the thread's last groups, may follow a wider one).
struct NextColumn {
  const uint8_t* first = nullptr;  // null when this thread has none
  int64_t groups = 0;
};

struct Ahead {
  const uint8_t* column = nullptr;  // this column's first block (the tile's first group)
  NextColumn next;
  int64_t blocks = 0;               // blocks per group in a column
  bool stream = false;              // the column's first token tile: it requests the weights ahead
  bool stream_into_next = false;    // and, as the only tile, the next column's first blocks too
  ColumnShare share;                // a later tile: its share of the next column (column_shares.h)
};

// Whether a column's only token tile (a column of at most kTileTokens tokens: decode) requests its weights ahead.
// The 8-bit types' do not: their lone tile leaves the stream to the hardware prefetchers, which kept up with it
// better. 5632x2048 from memory, 2 threads, Zen 4, µs, the variants alternated run by run, with against without
// the requests: 1 token Q8_0x8 379-397 against 333-345, I8x8 359-385 against 309-326; 4 tokens Q8_0x8 365-377
// against 342-349 (a third pair 356 against 385, in a slower minute), I8x8 355-368 against 314-353. Q4_0x8 keeps
// them (1 token 204-222 against 197-208, but 4 tokens 204-215 against 226-242), as the K-quants do (Q6_Kx8 at 4
// tokens 319-336 against 435-479). A matrix in L2 (1024x2048) took 18.5-18.7 µs against 15.6-16.1 for Q8_0x8: the
// requests cost issue slots, but requesting only a block's first line, or its first two or four, measured no
// better than all five; nor did hints into L2 (T1, T2) or NTA instead of L1.
template <ZmmKind K>
constexpr bool lone_tile_streams() {
  return K != ZmmKind::Q8_0 && K != ZmmKind::I8;
}

// The Ahead of token tile `tile` of `n_tiles` in a column of `blocks` blocks per group stream; a lone tile
// requests nothing unless `lone_tile_streams`.
inline Ahead tile_ahead(const uint8_t* column, NextColumn next, int64_t blocks, int64_t tile, int64_t n_tiles,
                        bool lone_tile_streams) {
  const bool stream = tile == 0 && (n_tiles > 1 || lone_tile_streams);
  Ahead ahead{column, next, blocks, stream, stream && n_tiles == 1 && next.first, {}};
  if (next.first) ahead.share = column_share(blocks, tile, n_tiles);
  return ahead;
}

// Requests one block of the first `groups` (at most 2·NZ) group streams from `at`: with kParts > 1, only share
// kPart of its lines, so that a tile whose block is long (the K-quants' 256 values) spreads the requests over
// the block's steps; see matmul_kquant_avx512.cpp for why.
template <int NZ, int kBlockBytes, auto kHint, int kParts = 1, int kPart = 0>
TESSERA_INLINE inline void prefetch_block(const uint8_t* at, size_t group_stride, int64_t groups = 2 * NZ) {
  using Share = LineShare<kBlockBytes, kParts, kPart>;
  static_for<2 * NZ>([&](auto g) TESSERA_INLINE {
    if (g >= groups) return;
    static_for<Share::kEnd - Share::kFirst>([&](auto line) TESSERA_INLINE {
      _mm_prefetch(reinterpret_cast<const char*>(at + g * group_stride + 64 * (Share::kFirst + line)), kHint);
    });
  });
}

template <int NZ, int kBlockBytes, int kParts = 1, int kPart = 0>
TESSERA_INLINE inline void prefetch_ahead(const Ahead& ahead, int64_t b, size_t group_stride) {
  constexpr int64_t kDistance = kStreamAheadBytes / kBlockBytes > 0 ? kStreamAheadBytes / kBlockBytes : 1;
  if (ahead.stream) {
    const int64_t p = b + kDistance;
    if (p < ahead.blocks) {
      prefetch_block<NZ, kBlockBytes, _MM_HINT_T0, kParts, kPart>(ahead.column + p * kBlockBytes, group_stride);
    } else if (ahead.stream_into_next) {
      prefetch_block<NZ, kBlockBytes, _MM_HINT_T0, kParts, kPart>(ahead.next.first + (p - ahead.blocks) * kBlockBytes,
                                                                  group_stride, ahead.next.groups);
    }
    return;
  }
  const int64_t p = share_block(ahead.share, b);
  if (p >= 0) {
    prefetch_block<NZ, kBlockBytes, _MM_HINT_T1, kParts, kPart>(ahead.next.first + p * kBlockBytes, group_stride,
                                                                ahead.next.groups);
  }
}

// prefetch_ahead for a share `part` known only at run time (a tile looping over a block's steps).
template <int NZ, int kBlockBytes, int kParts>
TESSERA_INLINE inline void prefetch_ahead_part(const Ahead& ahead, int64_t b, size_t group_stride, int part) {
  with_constant<kParts>(part, [&](auto p) TESSERA_INLINE {
    prefetch_ahead<NZ, kBlockBytes, kParts, p>(ahead, b, group_stride);
  });
}

// The first group of each of a tile's NZ registers, so that every load is one base register plus the group
// stride and a constant.
template <int NZ>
TESSERA_INLINE inline void register_groups(const MatmulArgs& a, int64_t group, const uint8_t* wz[NZ]) {
  static_for<NZ>([&](auto z) TESSERA_INLINE { wz[z] = a.w + static_cast<size_t>(group + 2 * z) * 8 * a.row_bytes; });
}

// Zeroes a tile's fp32 accumulators.
template <int NZ, int NT>
TESSERA_INLINE inline void zero_tile(__m512 (&acc)[NZ][NT]) {
  static_for<NZ>([&](auto z) TESSERA_INLINE { static_for<NT>([&](auto t) TESSERA_INLINE { acc[z][t] = _mm512_setzero_ps(); }); });
}

// Stores a tile's fp32 results: register z holds rows (group + 2z)·8 .. +15 of token t0 + t.
template <int NZ, int NT>
TESSERA_INLINE inline void store_tile(const MatmulArgs& a, const __m512 (&acc)[NZ][NT], int64_t t0, int64_t group) {
  static_for<NZ>([&](auto z) TESSERA_INLINE {
    static_for<NT>([&](auto t) TESSERA_INLINE {
      _mm512_storeu_ps(a.y + (t0 + t) * a.n_out + (group + 2 * z) * 8, acc[z][t]);
    });
  });
}

// Q8_0x8, Q4_0x8, I8x8: rows 16·z .. 16·z + 15 of the tile starting at group `group` (NZ registers), NT tokens.
// The int32 sums are not pinned (keep_in_zmm): GCC does not reassociate vpdpbusd chains, and pinned it stored
// all NZ·NT sums to the stack every block (Q8_0, Q4_0) or spilled them (I8); unpinned, 512-token products of
// 5632x2048 ran 16-17 % faster (2 threads, Zen 5, both versions timed call by call in one binary).
// Each vpdpbusd broadcasts its token's 4 bytes from memory itself (dpbusd_broadcast) rather than the NZ registers
// sharing one vpbroadcastd: 5632x2048 from L3, one thread, Zen 4, GOP/s at 128 and 512 tokens, Q8_0x8 350-352
// against 342-346, I8x8 433-437 against 421-426, Q4_0x8 351-355 against 350-354; from memory, 2 threads, 512
// tokens, Q8_0x8 674-697 against 613-679, I8x8 827-860 against 744-835.
template <ZmmKind K, int NZ, int NT>
__attribute__((noinline, flatten)) void tile_zmm(const MatmulArgs& a, const PackedTile& x, int64_t t0, int64_t group,
                                                 const Ahead& ahead) {
  constexpr int kBlockBytes = zmm_block_bytes<K>();
  constexpr bool kBlockScales = !per_row_acts<K>();
  const int64_t nb = a.n_in / 32;
  const size_t gs = 8 * a.row_bytes;
  const uint8_t* wz[NZ];
  register_groups<NZ>(a, group, wz);
  __m512 acc[NZ][NT];
  __m512i s32[NZ][NT];
  if constexpr (kBlockScales) {
    zero_tile(acc);
  } else {
    static_for<NT>([&](auto t) {
      const __m512i start = _mm512_set1_epi32(x.start[t]);
      static_for<NZ>([&](auto z) { s32[z][t] = start; });
    });
  }
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80)), low4 = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk[NZ];
    static_for<NZ>([&](auto z) { blk[z] = wz[z] + b * kBlockBytes; });
    prefetch_ahead<NZ, kBlockBytes>(ahead, b, gs);
    const int32_t* xb = x.q + b * 8 * NT;
    if constexpr (kBlockScales) {
      static_for<NT>([&](auto t) {
        const __m512i start = _mm512_set1_epi32(x.start[b * NT + t]);
        static_for<NZ>([&](auto z) { s32[z][t] = start; });
      });
    }
    if constexpr (K == ZmmKind::Q4_0) {
      static_for<4>([&](auto j) {
        __m512i lo[NZ], hi[NZ];
        static_for<NZ>([&](auto z) {
          const __m512i p = load_group_pair(blk[z] + 16 + 32 * j, gs);
          lo[z] = _mm512_and_si512(p, low4);
          hi[z] = _mm512_and_si512(_mm512_srli_epi16(p, 4), low4);
        });
        static_for<NT>([&](auto t) {
          static_for<NZ>([&](auto z) {
            s32[z][t] = dpbusd_broadcast(s32[z][t], lo[z], &xb[j * NT + t]);
            s32[z][t] = dpbusd_broadcast(s32[z][t], hi[z], &xb[(4 + j) * NT + t]);
          });
        });
      });
    } else {
      constexpr int kScaleBytes = K == ZmmKind::Q8_0 ? 16 : 0;
      static_for<8>([&](auto j) {
        __m512i w[NZ];
        static_for<NZ>([&](auto z) {
          w[z] = _mm512_xor_si512(load_group_pair(blk[z] + kScaleBytes + 32 * j, gs), flip);
        });
        static_for<NT>([&](auto t) {
          static_for<NZ>([&](auto z) { s32[z][t] = dpbusd_broadcast(s32[z][t], w[z], &xb[j * NT + t]); });
        });
      });
    }
    if constexpr (kBlockScales) {
      static_for<NZ>([&](auto z) {
        const __m512 dw = load_group_pair_scales(blk[z], gs);
        static_for<NT>([&](auto t) {
          const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(x.scale[b * NT + t]));
          acc[z][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s32[z][t]), scale, acc[z][t]);
        });
      });
    }
  }
  if constexpr (kBlockScales) {
    store_tile<NZ, NT>(a, acc, t0, group);
  } else {
    static_for<NZ>([&](auto z) {
      const int64_t row = (group + 2 * z) * 8;
      const __m512 row_scales = _mm512_loadu_ps(a.row_scales + row);
      static_for<NT>([&](auto t) {
        const __m512 scale = _mm512_mul_ps(row_scales, _mm512_set1_ps(x.scale[t]));
        _mm512_storeu_ps(a.y + (t0 + t) * a.n_out + row, _mm512_mul_ps(_mm512_cvtepi32_ps(s32[z][t]), scale));
      });
    });
  }
}

// A zmm family for zmm_interleaved_rows: its ZmmKind, its tile shape (kTileTokens tokens per tile, tile columns of
// at most kMaxRegisters registers of 16 rows), the state a tile column computes once for its token tiles (Column,
// from column<NZ>), one tile (tile<NZ, NT>), and its 256-bit family (Ymm).

// Tokens per zmm tile. Q8_0, Q4_0 and the K-quants keep an fp32 and an int32 accumulator per (register, token);
// I8 only the int32 one, so it takes twice the tokens. Chosen by matmul_roofline_bench (docs/performance.md).
// Q8_0 takes 7 (28 accumulators, no spill): on Zen 5, seven alternations against 6 (5632x2048 and 2048x5632),
// 16 tokens 339-447 µs against 363-485, 512 tokens 2-6 % less time in five, 0.3 and 1.8 % more in two; Q4_0 at
// 7 was 5-9 % slower at 512 tokens, and stays at 6. Not measured on Zen 4's 256-bit units.
template <ZmmKind K>
constexpr int zmm_tile_tokens() {
  return K == ZmmKind::I8 ? 8 : K == ZmmKind::Q8_0 ? 7 : K == ZmmKind::Q4_0 ? 6 : 4;
}

// The column state of the families that need none.
struct NoColumnState {
  struct Column {};
  template <int NZ>
  static Column column(const MatmulArgs&, int64_t) {
    return {};
  }
};

// Q8_0x8, Q4_0x8 and I8x8: tile_zmm.
template <ZmmKind K, typename YmmFamily>
struct ZmmBlockFamily : NoColumnState {
  static constexpr ZmmKind kKind = K;
  static constexpr int kTileTokens = zmm_tile_tokens<K>(), kMaxRegisters = 2;
  using Ymm = YmmFamily;
  template <int NZ, int NT>
  TESSERA_INLINE static void tile(const MatmulArgs& a, const PackedTile& x, int64_t t0, int64_t group,
                                  const Ahead& ahead, const Column&) {
    tile_zmm<K, NZ, NT>(a, x, t0, group, ahead);
  }
};

// One token block's activations packed tile by tile (PackedTile, in `tiles`: BalancedTiles of at most NT tokens,
// the split its tile column computes in), in this thread's scratch. The scratch keeps every block of the
// activations it last saw (QuantizedActs::id) at its place: a thread that computes several row chunks of a
// matrix (ThreadPool::parallel_for_dynamic), or several matrices of one input (q, k and v), packs a block once.
template <ZmmKind K, int NT>
struct PackedBlock {
  int64_t tb = 0, per_token = 0, scales_per_token = 0, starts_per_token = 0;  // the first token; entries per token
  BalancedTiles<NT> tiles;
  int32_t* q = nullptr;
  float* scale = nullptr;
  int32_t* start = nullptr;

  // Token blocks start at multiples of `block`.
  PackedBlock(const MatmulArgs& a, int64_t tb_, int64_t te, int64_t block) : tb(tb_), tiles(te - tb_) {
    struct Scratch {
      uint64_t id = 0;  // 0: holds nothing reusable
      std::vector<int32_t> q, start;
      std::vector<float> scale;
      std::vector<int64_t> packed_end;  // per token block: its end once packed, else 0
    };
    thread_local Scratch scratch;
    per_token = a.n_in / 4;
    scales_per_token = packed_scales<K>(a.n_in);
    starts_per_token = packed_starts<K>(a.n_in);
    auto grow_to = [](auto& v, size_t size) {
      if (v.size() < size) v.resize(size);
      return v.data();
    };
    const size_t n = static_cast<size_t>(a.n_tokens);
    const size_t index = static_cast<size_t>(tb / block);
    if (!still_packed_for(scratch.id, a.xq.id)) {
      scratch.packed_end.assign(static_cast<size_t>((a.n_tokens + block - 1) / block), 0);
    }
    q = grow_to(scratch.q, n * static_cast<size_t>(per_token)) + tb * per_token;
    scale = grow_to(scratch.scale, n * static_cast<size_t>(scales_per_token)) + tb * scales_per_token;
    start = grow_to(scratch.start, n * static_cast<size_t>(starts_per_token)) + tb * starts_per_token;
    if (scratch.packed_end[index] == te) return;
    for (int64_t j = 0; j < tiles.count; ++j) {
      const int64_t i = tiles.begin(j);
      pack_tile<K>(a, tb + i, static_cast<int>(tiles.width(j)), q + i * per_token, scale + i * scales_per_token,
                   start + i * starts_per_token);
    }
    scratch.packed_end[index] = te;
  }

  PackedTile tile(int64_t t) const {
    const int64_t i = t - tb;
    return {q + i * per_token, scale + i * scales_per_token, start + i * starts_per_token};
  }
};

// The block's tokens for one tile column (NZ registers from `group`) in the block's tiles (x.tiles); the first
// tile streams the column's weights, the others request the next column's (Ahead). `next`: the column this
// thread computes next.
template <typename Family, int NZ>
void zmm_tile_column(const MatmulArgs& a, const PackedBlock<Family::kKind, Family::kTileTokens>& x, int64_t group,
                     NextColumn next) {
  constexpr ZmmKind K = Family::kKind;
  const int64_t nb = a.n_in / zmm_block_values<K>();
  const uint8_t* first = a.w + static_cast<size_t>(group) * 8 * a.row_bytes;
  const typename Family::Column column = Family::template column<NZ>(a, group);
  for_each_balanced_tile(x.tiles, x.tb, [&](auto nt, int64_t t, int64_t tile) {
    const Ahead ahead = tile_ahead(first, next, nb, tile, x.tiles.count, lone_tile_streams<K>());
    Family::template tile<NZ, decltype(nt)::value>(a, x.tile(t), t, group, ahead, column);
  });
}

// A token block's packed activations (one byte per value) take at most this much of L2. Each tile column
// reads its weights once per block; with the next column requested ahead (Ahead), 512 and 768 KiB blocks
// measured within 3 % of 192 KiB for 512-token products of 5632x2048 and 2048x5632 Q8_0x8 and I8x8.
constexpr int64_t kZmmBlockBytes = 192 << 10;

// Family: a zmm family (ZmmBlockFamily, or the K-quants' in matmul_kquant_avx512.cpp), whose Ymm family
// (matmul_ymm_inl.h's interleaved_rows) takes a thread's last group when its group count is odd.
template <typename Family>
void zmm_interleaved_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr ZmmKind K = Family::kKind;
  constexpr int64_t kNT = Family::kTileTokens;
  const int64_t block = std::max<int64_t>(kNT, kZmmBlockBytes / a.n_in / kNT * kNT);
  const int64_t g_end = row_end / 8;
  for (int64_t tb = 0; tb < a.n_tokens; tb += block) {
    const int64_t te = std::min(a.n_tokens, tb + block);
    const PackedBlock<K, Family::kTileTokens> x(a, tb, te, block);
    // The column after g's (`groups` wide): the next in this block, else this thread's first in the next block;
    // after the range's last column of the last block, the matrix's next column, which is usually where this
    // thread goes on (matmul_shared_input hands out row chunks in order): a chunk's first column does not start
    // cold.
    const int64_t matrix_groups = a.n_out / 8;
    auto next = [&](int64_t g, int64_t groups) -> NextColumn {
      if (g + groups < g_end) return {a.w + static_cast<size_t>(g + groups) * 8 * a.row_bytes, g_end - g - groups};
      if (te < a.n_tokens) return {a.w + static_cast<size_t>(row_begin / 8) * 8 * a.row_bytes, g_end - row_begin / 8};
      if (g_end < matrix_groups) return {a.w + static_cast<size_t>(g_end) * 8 * a.row_bytes, matrix_groups - g_end};
      return {};
    };
    int64_t g = row_begin / 8;
    if constexpr (Family::kMaxRegisters >= 2) {
      for (; g + 4 <= g_end; g += 4) zmm_tile_column<Family, 2>(a, x, g, next(g, 4));
    }
    for (; g + 2 <= g_end; g += 2) zmm_tile_column<Family, 1>(a, x, g, next(g, 2));
    for (; g < g_end; ++g) {
      int64_t t = tb;
      for (; t + kInterleavedTileTokens <= te; t += kInterleavedTileTokens)
        Family::Ymm::template tile<kInterleavedTileTokens>(a, t, g);
      remainder_tiles<typename Family::Ymm>(a, t, te, g);
    }
  }
}

}  // namespace
}  // namespace tessera::kernels
