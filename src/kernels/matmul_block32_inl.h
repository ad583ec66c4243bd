// Q8_0 and Q4_0 rows (WeightLayout::Rows): the 32-value block tile the two share, for the Q8_0 and Q4_0 kernel
// files of both x86 levels (matmul_q8_0_*.cpp, matmul_q4_0_*.cpp). Anonymous namespace and an explicit YmmIsa
// parameter, as matmul_ymm_inl.h explains.
#pragma once

#include "kernels/matmul_ymm_inl.h"

namespace tessera::kernels {
namespace {

// Weight types whose 32-value blocks hold small ints and one fp16 scale: Q8_0 (34 bytes, signed values) and
// Q4_0 (18 bytes, values stored as unsigned nibbles offset by 8).
struct Q8_0Block {
  static constexpr int kBytes = 34;
  static constexpr bool kOffset8 = false;
  static __m256i load(const uint8_t* blk) { return _mm256_loadu_si256((const __m256i*)(blk + 2)); }
};
struct Q4_0Block {
  static constexpr int kBytes = 18;
  // load() returns the stored nibbles q in [0, 15]; the value is q - 8 (see tile_block32).
  static constexpr bool kOffset8 = true;
  // Values 0-15 are the low nibbles of the 16 bytes, 16-31 the high nibbles: the bytes go to both 128-bit
  // halves and only the upper half is shifted (a per-lane variable shift), three instructions in all.
  static __m256i load(const uint8_t* blk) {
    const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)(blk + 2)));
    const __m256i shifted = _mm256_srlv_epi32(raw, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
  }
};

// Q8_0: signed × signed bytes through an unsigned × signed product: |x| · (w with x's sign). |x| comes
// precomputed with the activations (QuantizedActs::q_abs), so per (token, row) and block the integer part is one
// vpsignb and dot_u8s8. At decode (one token) |w| · (x with w's sign) gives the same integer lanes and measured
// faster. Weights must lie in [-127, 127] (w = -128 with a negative x would wrap), which the Q8_0 quantizer
// guarantees (round(x / (amax / 127))).
//
// Q4_0: the nibbles are already unsigned, so dot_u8s8(q, x) needs no sign trick, and the offset is exact integer
// arithmetic per lane: Σ (q - 8)·x = Σ q·x - 8·Σ x, with 8·Σ x (lane j: bytes 4j..4j+3) formed once per token
// block and shared by the tile's rows. The same int32 lanes as subtracting 8 first, with two instructions fewer
// per (token, row) pair.
//
// Every element, in every tile shape, runs acc = fma(float(Σ_block q_w·q_x), d_w · d_x, acc) over the blocks
// in order, lane j of the block sum covering bytes 4j..4j+3, and then hsum(acc): the scale product is one
// fp32 multiply (of d_w and d_x, whether scalar or in vector lanes, the same bits), so every tile shape and
// the decode path give the same result.
template <typename Isa, typename Block, int NT, int NR>
__attribute__((noinline, flatten)) void tile_block32(const TileCtx& c) {
  const int64_t nb = c.a.n_in / 32;
  __m256 acc[NT][NR];
  const uint8_t* wr[NR];
  const int8_t* xq[NT];
  const int8_t* xa[NT];
  const float* xd[NT];
  static_for<NR>([&](auto r) { wr[r] = c.wrow(r); });
  static_for<NT>([&](auto t) {
    xq[t] = c.a.xq.q + (c.t0 + t) * c.a.n_in;
    xa[t] = c.a.xq.q_abs + (c.t0 + t) * c.a.n_in;
    xd[t] = c.a.xq.scale + (c.t0 + t) * nb;
    static_for<NR>([&](auto r) { acc[t][r] = _mm256_setzero_ps(); });
  });
  // One block for all pairs of the tile; scale(t, r) gives the pair's d_w · d_x broadcast to 8 lanes.
  auto block = [&](int64_t b, auto&& scale) TESSERA_INLINE {
    __m256i w[NR], wa[NR];
    static_for<NR>([&](auto r) {
      const uint8_t* blk = wr[r] + b * Block::kBytes;
      prefetch(blk + kPrefetchBytes);
      w[r] = Block::load(blk);
      if constexpr (NT == 1 && !Block::kOffset8) wa[r] = _mm256_abs_epi8(w[r]);
    });
    static_for<NT>([&](auto t) {
      const __m256i xv = _mm256_loadu_si256((const __m256i*)(xq[t] + b * 32));
      if constexpr (Block::kOffset8) {
        const __m256i offset = Isa::dot_u8s8(_mm256_set1_epi8(8), xv);
        static_for<NR>([&](auto r) {
          const __m256i p = _mm256_sub_epi32(Isa::dot_u8s8(w[r], xv), offset);
          acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale(t, r), acc[t][r]);
        });
      } else if constexpr (NT == 1) {
        static_for<NR>([&](auto r) {
          const __m256i p = Isa::dot_u8s8(wa[r], _mm256_sign_epi8(xv, w[r]));
          acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale(t, r), acc[t][r]);
        });
      } else {
        const __m256i av = _mm256_loadu_si256((const __m256i*)(xa[t] + b * 32));
        static_for<NR>([&](auto r) {
          const __m256i p = Isa::dot_u8s8(av, _mm256_sign_epi8(w[r], xv));
          acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale(t, r), acc[t][r]);
        });
      }
    });
  };
  int64_t b = 0;
  if (c.wd != nullptr) {
    // Batches: the products for 8 blocks at once, one vmulps per pair, read back by broadcast loads (load
    // ports only) instead of a multiply per pair and block.
    for (; b + 8 <= nb; b += 8) {
      alignas(32) float prod[NT * NR][8];
      static_for<NT>([&](auto t) {
        const __m256 dx = _mm256_loadu_ps(xd[t] + b);
        static_for<NR>([&](auto r) {
          _mm256_store_ps(prod[t * NR + r], _mm256_mul_ps(_mm256_loadu_ps(c.wd + r * c.wd_stride + b), dx));
        });
      });
      for (int j = 0; j < 8; ++j) {
        block(b + j, [&](int t, int r) TESSERA_INLINE { return _mm256_broadcast_ss(&prod[t * NR + r][j]); });
      }
    }
  }
  // Decode (and a batch's last blocks): the fp16 weight scale is broadcast as it is loaded and converted in
  // a vector register, then multiplied by the broadcast activation scale; no scalar round trip through memory.
  for (; b < nb; ++b) {
    __m256 dw[NR], dx[NT];
    static_for<NR>([&](auto r) {
      uint16_t h;
      std::memcpy(&h, wr[r] + b * Block::kBytes, 2);
      dw[r] = _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
    });
    static_for<NT>([&](auto t) { dx[t] = _mm256_broadcast_ss(xd[t] + b); });
    block(b, [&](int t, int r) TESSERA_INLINE { return _mm256_mul_ps(dw[r], dx[t]); });
  }
  static_for<NT>([&](auto t) { static_for<NR>([&](auto r) { c.out(t, r) = hsum(acc[t][r]); }); });
}

// Rows of Q8_0 or Q4_0 (Block) for row_tiles.
template <typename Isa, typename Block>
struct Block32Tile {
  template <int NT, int NR>
  static void run(const TileCtx& c) { tile_block32<Isa, Block, NT, NR>(c); }
};

// Rows [row_begin, row_end) of a Q8_0 or Q4_0 matrix in the Rows layout, every token.
template <typename Isa, typename Block>
void block32_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  row_tiles<Isa, Block32Tile<Isa, Block>>(a, row_begin, row_end, Block::kBytes);
}

}  // namespace
}  // namespace tessera::kernels
