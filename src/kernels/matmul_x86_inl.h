// Shared body of the x86 matmul kernels, compiled once per ISA: matmul_avx2.cpp and matmul_avx512.cpp include
// it inside their own namespace (so the two copies never meet at link time) after defining
//   dot_u8s8(u, s): 8 int32 lanes, lane j = Σ u[4j+i] * s[4j+i] (u unsigned, s signed bytes, no saturation
//                   for |u| ≤ 128 and |s| ≤ 127), and
//   rows_per_tile(n_tokens): how many weight rows one register tile covers for that many tokens.
// All vectors are 256 bits wide: a block of 32 int8 values is one register, and AVX-512 helps through VNNI
// and its 32 registers rather than width.
//
// Batch invariance: every output element (t, o) is reduced by the same sequence of vector operations,
// whichever tile it falls in, so results do not depend on n_tokens, on the other tokens, or on the row split.

// ---- small helpers ------------------------------------------------------------------------------------------

inline float half_to_float(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Loops over a tile's tokens and rows must be unrolled so that accumulators live in registers.
#define UNROLL _Pragma("GCC unroll 16")

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

// Fixed-order horizontal sums.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

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

// Rounds 32 floats times `mul` to nearest-even int8 (values must lie in [-127, 127]) and returns them in order,
// with the four int32 vectors in i[] for sums.
inline __m256i quantize32(const float* x, __m256 mul, __m256i i[4]) {
  UNROLL
  for (int k = 0; k < 4; ++k) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), mul));
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
  // packs works per 128-bit lane: restore element order (dwords 0,4,1,5,2,6,3,7).
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// ---- activation quantization --------------------------------------------------------------------------------

void quantize_acts_impl(const float* x, int64_t n_in, int64_t t_begin, int64_t t_end, bool per_row, int8_t* q,
                        int8_t* q_abs, float* scale, float* block_sum, int16_t* sum16, int32_t* row_sum) {
  const int64_t nb = n_in / 32;
  for (int64_t t = t_begin; t < t_end; ++t) {
    const float* xt = x + t * n_in;
    int8_t* qt = q + t * n_in;
    int8_t* at = q_abs + t * n_in;
    __m256i iv[4];
    if (per_row) {
      __m256 vmax = _mm256_setzero_ps();
      int64_t i = 0;
      for (; i + 8 <= n_in; i += 8) vmax = _mm256_max_ps(vmax, abs_ps(_mm256_loadu_ps(xt + i)));
      float amax = hmax(vmax);
      for (; i < n_in; ++i) amax = max_f(amax, __builtin_fabsf(xt[i]));
      const float d = amax / 127.0f;
      // Scales below the smallest normal float would give an infinite inverse, whose products convert to
      // INT_MIN and saturate to -128 in the bytes but not in the sums (the 512-bit tiles read both).
      const float inv = d >= 0x1p-126f ? 1.0f / d : 0.0f;
      const __m256 mul = _mm256_set1_ps(inv);
      __m256i sum = _mm256_setzero_si256();
      for (i = 0; i + 32 <= n_in; i += 32) {
        const __m256i qv = quantize32(xt + i, mul, iv);
        _mm256_storeu_si256((__m256i*)(qt + i), qv);
        _mm256_storeu_si256((__m256i*)(at + i), _mm256_abs_epi8(qv));
        sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3])));
      }
      int32_t total = hsum_epi32(sum);
      for (; i < n_in; ++i) {
        qt[i] = static_cast<int8_t>(_mm_cvtss_si32(_mm_set_ss(xt[i] * inv)));
        at[i] = static_cast<int8_t>(qt[i] < 0 ? -qt[i] : qt[i]);
        total += qt[i];
      }
      scale[t] = d;
      row_sum[t] = total;
      continue;
    }
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = xt + b * 32;
      __m256 vmax = abs_ps(_mm256_loadu_ps(xb));
      for (int k = 1; k < 4; ++k) vmax = _mm256_max_ps(vmax, abs_ps(_mm256_loadu_ps(xb + 8 * k)));
      const float amax = hmax(vmax);
      const float d = amax / 127.0f;
      // Scales below the smallest normal float would give an infinite inverse, whose products convert to
      // INT_MIN and saturate to -128 in the bytes but not in the sums (the 512-bit tiles read both).
      const float inv = d >= 0x1p-126f ? 1.0f / d : 0.0f;
      const __m256i qv = quantize32(xb, _mm256_set1_ps(inv), iv);
      _mm256_storeu_si256((__m256i*)(qt + b * 32), qv);
      _mm256_storeu_si256((__m256i*)(at + b * 32), _mm256_abs_epi8(qv));
      const int32_t s0 = hsum_epi32(_mm256_add_epi32(iv[0], iv[1]));
      const int32_t s1 = hsum_epi32(_mm256_add_epi32(iv[2], iv[3]));
      scale[t * nb + b] = d;
      block_sum[t * nb + b] = d * static_cast<float>(s0 + s1);
      sum16[t * nb * 2 + 2 * b] = static_cast<int16_t>(s0);
      sum16[t * nb * 2 + 2 * b + 1] = static_cast<int16_t>(s1);
    }
  }
}

// ---- tiles --------------------------------------------------------------------------------------------------
// Each tile computes NT tokens × NR rows with one accumulator per pair, then stores them. Loads of a weight
// block are shared by the NT tokens and loads of an activation block by the NR rows.

struct TileCtx {
  const MatmulArgs& a;
  int64_t t0, r0;
  // Q8_0 / Q4_0 in batches: the tile's weight block scales as fp32, row r at wd + r * wd_stride; null at decode.
  const float* wd = nullptr;
  int64_t wd_stride = 0;
  const uint8_t* wrow(int r) const { return a.w + static_cast<size_t>(r0 + r) * a.row_bytes; }
  float& out(int t, int r) const { return a.y[(t0 + t) * a.n_out + r0 + r]; }
};

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
template <typename Block, int NT, int NR>
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
        const __m256i offset = dot_u8s8(_mm256_set1_epi8(8), xv);
        static_for<NR>([&](auto r) {
          const __m256i p = _mm256_sub_epi32(dot_u8s8(w[r], xv), offset);
          acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale(t, r), acc[t][r]);
        });
      } else if constexpr (NT == 1) {
        static_for<NR>([&](auto r) {
          const __m256i p = dot_u8s8(wa[r], _mm256_sign_epi8(xv, w[r]));
          acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale(t, r), acc[t][r]);
        });
      } else {
        const __m256i av = _mm256_loadu_si256((const __m256i*)(xa[t] + b * 32));
        static_for<NR>([&](auto r) {
          const __m256i p = dot_u8s8(av, _mm256_sign_epi8(w[r], xv));
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

// Q4_0x8 (kernels/interleave.h), one group of 8 rows for NT tokens: each register holds 4 values of all 8
// rows, so the rows' sums stay in separate int32 lanes and every block ends with one conversion and one FMA for
// the 8 rows instead of one per row. Per block and token: vector Vj's low nibbles are values 4j..4j+3 and its
// high nibbles 16+4j..16+4j+3 of each row, multiplied (vpmaddubsw) with those 4 activation bytes broadcast; the
// eight products add up in int16 (each pair sum is at most 2·15·127, eight of them 30480 < 32767), and vpmaddwd
// by 1 leaves row l's Σ q·x in lane l. The nibbles' offset of 8 is exact integer arithmetic: 8·Σx from the two
// 16-value sums of the activations. Every token runs the same operations whatever NT is (batch invariance).
inline __m256i broadcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Block b of an interleaved group of 8 rows, with the bytes kPrefetchBytes further on requested.
TESSERA_INLINE inline const uint8_t* group_block(const MatmulArgs& a, int64_t group, int64_t b, int block_bytes) {
  const uint8_t* blk = a.w + static_cast<size_t>(group) * 8 * a.row_bytes + b * block_bytes;
  for (int line = 0; line < block_bytes; line += 64) prefetch(blk + kPrefetchBytes + line);
  return blk;
}

// Token t0 + t's quantized activations, for t < NT: the pointers every interleaved tile starts from.
template <int NT>
struct TileActs {
  const int8_t* q[NT];
  const int8_t* q_abs[NT];
  const float* scale[NT];      // one per 32-value block
  const float* block_sum[NT];  // one per 32-value block
  const int16_t* sum16[NT];    // one per 16 values

  TESSERA_INLINE TileActs(const MatmulArgs& a, int64_t t0) {
    const int64_t nb = a.n_in / 32;
    static_for<NT>([&](auto t) {
      q[t] = a.xq.q + (t0 + t) * a.n_in;
      q_abs[t] = a.xq.q_abs + (t0 + t) * a.n_in;
      scale[t] = a.xq.scale + (t0 + t) * nb;
      block_sum[t] = a.xq.block_sum + (t0 + t) * nb;
      sum16[t] = a.xq.sum16 + (t0 + t) * nb * 2;
    });
  }
};

template <int NT>
__attribute__((noinline, flatten)) void tile_q4_0x8(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 144;  // 8 fp16 scales + 4 × 32 nibble bytes
  const int64_t nb = a.n_in / 32;
  const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1), eights = _mm256_set1_epi16(8);
  const TileActs<NT> x(a, t0);
  __m256 acc[NT];
  static_for<NT>([&](auto t) { acc[t] = _mm256_setzero_ps(); });
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group_block(a, group, b, kBlockBytes);
    __m256i s16[NT];
    static_for<NT>([&](auto t) { s16[t] = _mm256_setzero_si256(); });
    static_for<4>([&](auto j) {
      const __m256i p = _mm256_loadu_si256((const __m256i*)(blk + 16 + 32 * j));
      const __m256i lo = _mm256_and_si256(p, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(p, 4), low4);
      static_for<NT>([&](auto t) {
        const int8_t* xb = x.q[t] + b * 32;
        s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(lo, broadcast32(xb + 4 * j)));
        s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(hi, broadcast32(xb + 16 + 4 * j)));
        keep_in_register(s16[t]);
      });
    });
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)blk));
    static_for<NT>([&](auto t) {
      const __m256i offset = _mm256_madd_epi16(broadcast32(x.sum16[t] + 2 * b), eights);
      const __m256i sum = _mm256_sub_epi32(_mm256_madd_epi16(s16[t], ones), offset);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_broadcast_ss(x.scale[t] + b)), acc[t]);
    });
  }
  static_for<NT>([&](auto t) { _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + group * 8, acc[t]); });
}

// s32[t] += the int32 lanes of Σ w·x over 4 bytes per lane, for vector v of 8 rows' weights and the 4 activation
// bytes at offset i of each token, broadcast. Signed × signed through vpmaddubsw's unsigned × signed: one token
// takes |x| · (w with x's sign), both broadcasts loaded; more tokens share |w| and each takes (x with w's sign),
// one broadcast each. Both give the same exact integers (|w|, |x| ≤ 127: no saturation).
template <int NT>
TESSERA_INLINE inline void s32_products(__m256i v, const int8_t* const* xq, const int8_t* const* xa, int64_t i,
                                        __m256i* s32) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (NT == 1) {
    const __m256i signed_w = _mm256_sign_epi8(v, broadcast32(xq[0] + i));
    s32[0] = _mm256_add_epi32(s32[0], _mm256_madd_epi16(_mm256_maddubs_epi16(broadcast32(xa[0] + i), signed_w), ones));
    keep_in_register(s32[0]);
  } else {
    const __m256i abs_w = _mm256_abs_epi8(v);
    static_for<NT>([&](auto t) {
      const __m256i signed_x = _mm256_sign_epi8(broadcast32(xq[t] + i), v);
      s32[t] = _mm256_add_epi32(s32[t], _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, signed_x), ones));
      keep_in_register(s32[t]);
    });
  }
}

// Q8_0x8 (kernels/interleave.h), one group of 8 rows for NT tokens, the same scheme as Q4_0x8 with signed
// weights: vector Vj holds values 4j..4j+3 of the 8 rows, multiplied (s32_products) with those 4 activation
// bytes broadcast. A pair sum can reach 2·127·127, so each product widens to int32 at once (vpmaddwd by 1)
// before the eight add up.
template <int NT>
__attribute__((noinline, flatten)) void tile_q8_0x8(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 272;  // 8 fp16 scales + 8 × 32 bytes
  const int64_t nb = a.n_in / 32;
  const TileActs<NT> x(a, t0);
  __m256 acc[NT];
  static_for<NT>([&](auto t) { acc[t] = _mm256_setzero_ps(); });
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group_block(a, group, b, kBlockBytes);
    __m256i s32[NT];
    static_for<NT>([&](auto t) { s32[t] = _mm256_setzero_si256(); });
    static_for<8>([&](auto j) {
      const __m256i v = _mm256_loadu_si256((const __m256i*)(blk + 16 + 32 * j));
      s32_products<NT>(v, x.q, x.q_abs, b * 32 + 4 * j, s32);
    });
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)blk));
    static_for<NT>([&](auto t) {
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[t]), _mm256_mul_ps(dw, _mm256_broadcast_ss(x.scale[t] + b)),
                               acc[t]);
    });
  }
  static_for<NT>([&](auto t) { _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + group * 8, acc[t]); });
}

// Two groups (16 rows) at once, for NT tokens: s32[g][t] += the int32 lanes of the 8 weight vectors of block b,
// each loaded from blk[g] + offset + 32·j, times token t's activations, as in s32_products (|w| · (x with w's
// sign)). Each activation broadcast serves both groups' vectors: one load fewer per two products than one group.
template <int NT>
TESSERA_INLINE inline void pair_block_products(const uint8_t* const blk[2], int offset, const TileActs<NT>& x,
                                               int64_t b, __m256i s32[2][NT]) {
  const __m256i ones = _mm256_set1_epi16(1);
  static_for<8>([&](auto j) {
    __m256i v[2], abs_w[2];
    static_for<2>([&](auto g) {
      v[g] = _mm256_loadu_si256((const __m256i*)(blk[g] + offset + 32 * j));
      abs_w[g] = _mm256_abs_epi8(v[g]);
    });
    static_for<NT>([&](auto t) {
      const __m256i xv = broadcast32(x.q[t] + b * 32 + 4 * j);
      static_for<2>([&](auto g) {
        const __m256i signed_x = _mm256_sign_epi8(xv, v[g]);
        s32[g][t] = _mm256_add_epi32(s32[g][t], _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w[g], signed_x), ones));
        keep_in_register(s32[g][t]);
      });
    });
  });
}

// Q8_0x8 for groups `group` and `group + 1` at once (16 rows, NT tokens). Every element runs tile_q8_0x8's
// operations in the same order (the same int32 block sums, scale product and FMA), so the bits match whichever
// tile computes it.
template <int NT>
__attribute__((noinline, flatten)) void tile_q8_0x8_pair(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 272;
  const int64_t nb = a.n_in / 32;
  const TileActs<NT> x(a, t0);
  __m256 acc[2][NT];
  static_for<2>([&](auto g) { static_for<NT>([&](auto t) { acc[g][t] = _mm256_setzero_ps(); }); });
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk[2] = {group_block(a, group, b, kBlockBytes), group_block(a, group + 1, b, kBlockBytes)};
    __m256i s32[2][NT];
    static_for<2>([&](auto g) { static_for<NT>([&](auto t) { s32[g][t] = _mm256_setzero_si256(); }); });
    pair_block_products<NT>(blk, 16, x, b, s32);
    static_for<2>([&](auto g) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)blk[g]));
      static_for<NT>([&](auto t) {
        acc[g][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[g][t]),
                                    _mm256_mul_ps(dw, _mm256_broadcast_ss(x.scale[t] + b)), acc[g][t]);
      });
    });
  }
  static_for<2>([&](auto g) {
    static_for<NT>([&](auto t) { _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + (group + g) * 8, acc[g][t]); });
  });
}

// I8x8 for groups `group` and `group + 1` at once: tile_i8x8's whole-row int32 sums and final multiply.
template <int NT>
__attribute__((noinline, flatten)) void tile_i8x8_pair(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 256;
  const int64_t nb = a.n_in / 32;
  const TileActs<NT> x(a, t0);
  __m256i s32[2][NT];
  static_for<2>([&](auto g) { static_for<NT>([&](auto t) { s32[g][t] = _mm256_setzero_si256(); }); });
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk[2] = {group_block(a, group, b, kBlockBytes), group_block(a, group + 1, b, kBlockBytes)};
    pair_block_products<NT>(blk, 0, x, b, s32);
  }
  static_for<2>([&](auto g) {
    const __m256 row_scales = _mm256_loadu_ps(a.row_scales + (group + g) * 8);
    static_for<NT>([&](auto t) {
      const __m256 scale = _mm256_mul_ps(row_scales, _mm256_set1_ps(a.xq.scale[t0 + t]));
      _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + (group + g) * 8, _mm256_mul_ps(_mm256_cvtepi32_ps(s32[g][t]), scale));
    });
  });
}

// I8x8 (kernels/interleave.h), one group of 8 rows for NT tokens: Q8_0x8's products without block scales. The
// whole row reduces in exact int32 lanes (one per row) and is scaled once by the 8 rows' scales times the
// token's, the same integers and the same final multiply as the row kernel (tile_i8).
template <int NT>
__attribute__((noinline, flatten)) void tile_i8x8(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 256;  // 8 rows × 32 values
  const int64_t nb = a.n_in / 32;
  const TileActs<NT> x(a, t0);
  __m256i s32[NT];
  static_for<NT>([&](auto t) { s32[t] = _mm256_setzero_si256(); });
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group_block(a, group, b, kBlockBytes);
    static_for<8>([&](auto j) {
      const __m256i v = _mm256_loadu_si256((const __m256i*)(blk + 32 * j));
      s32_products<NT>(v, x.q, x.q_abs, b * 32 + 4 * j, s32);
    });
  }
  const __m256 row_scales = _mm256_loadu_ps(a.row_scales + group * 8);
  static_for<NT>([&](auto t) {
    const __m256 scale = _mm256_mul_ps(row_scales, _mm256_set1_ps(a.xq.scale[t0 + t]));
    _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + group * 8, _mm256_mul_ps(_mm256_cvtepi32_ps(s32[t]), scale));
  });
}

// The 8 rows' d·sc_j and dmin·m_j for sub-blocks j = 0..7 of one Q4_Kx8 super-block (kernels/interleave.h):
// q4_k_unpack_scales' bit moves with one row per 32-bit lane. V0's lanes hold each row's fp16 (d, dmin) pair;
// one byte shuffle and one qword permute gather the 8 d and then the 8 dmin.
TESSERA_INLINE inline void q4_kx8_scales(const uint8_t* blk, float dsc[8][8], float dmn[8][8]) {
  const __m256i pairs = _mm256_loadu_si256((const __m256i*)blk);
  const __m256i a = _mm256_loadu_si256((const __m256i*)(blk + 32));
  const __m256i b = _mm256_loadu_si256((const __m256i*)(blk + 64));
  const __m256i c = _mm256_loadu_si256((const __m256i*)(blk + 96));
  const __m256i d_then_dmin = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                                                0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const __m256i split = _mm256_shuffle_epi8(pairs, d_then_dmin);
  const __m256i ordered = _mm256_permute4x64_epi64(split, 0xd8);  // d0-3, d4-7, dmin0-3, dmin4-7
  const __m256 d = _mm256_cvtph_ps(_mm256_castsi256_si128(ordered));
  const __m256 dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(ordered, 1));
  const __m256i m6 = _mm256_set1_epi8(0x3f), m4 = _mm256_set1_epi8(0x0f), top2 = _mm256_set1_epi8(0x30);
  const __m256i sc[2] = {_mm256_and_si256(a, m6),
                         _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_srli_epi32(a, 2), top2))};
  const __m256i mn[2] = {_mm256_and_si256(b, m6), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(c, 4), m4),
                                                                  _mm256_and_si256(_mm256_srli_epi32(b, 2), top2))};
  const __m256i byte = _mm256_set1_epi32(0xff);
  static_for<8>([&](auto j) {
    constexpr int half = decltype(j)::value / 4, shift = 8 * (decltype(j)::value % 4);
    const __m256i s = _mm256_and_si256(_mm256_srli_epi32(sc[half], shift), byte);
    const __m256i m = _mm256_and_si256(_mm256_srli_epi32(mn[half], shift), byte);
    _mm256_store_ps(dsc[j], _mm256_mul_ps(d, _mm256_cvtepi32_ps(s)));
    _mm256_store_ps(dmn[j], _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(m)));
  });
}

// Q4_Kx8 (kernels/interleave.h), one group of 8 rows for NT tokens. value = d·sc_j·q − dmin·m_j per 32-value
// sub-block j, q in [0, 15]. Each super-block's scales are unpacked once for the NT tokens (q4_kx8_scales);
// sub-block j is then Q4_0x8's scheme: 8 vectors of its nibbles (values 4u..4u+3 of the 8 rows) times those 4
// activation bytes broadcast, summed in int16 (at most 8·2·15·127 = 30480), widened once, and finished with one
// FMA for the q·x part and one for the min part (the activations' block sum). The same operations for every
// token whatever NT is (batch invariance). Its lambdas, and Q6_Kx8's, are marked always-inline: with bodies this
// large `flatten` alone left Q6_Kx8's block loop out of line at 3-4 tokens, its accumulators in memory.
template <int NT>
__attribute__((noinline, flatten)) void tile_q4_kx8(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 1152;  // 36 vectors: (d, dmin), 3 of packed scales, 32 of quants
  const int64_t nsb = a.n_in / 256;
  const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  const TileActs<NT> x(a, t0);
  __m256 acc[NT];
  static_for<NT>([&](auto t) TESSERA_INLINE { acc[t] = _mm256_setzero_ps(); });
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk = group_block(a, group, sb, kBlockBytes);
    alignas(32) float dsc[8][8], dmn[8][8];
    q4_kx8_scales(blk, dsc, dmn);
    static_for<8>([&](auto j) TESSERA_INLINE {
      constexpr int chunk = decltype(j)::value / 2;
      constexpr bool high = decltype(j)::value % 2 == 1;
      __m256i s16[NT];
      static_for<NT>([&](auto t) TESSERA_INLINE { s16[t] = _mm256_setzero_si256(); });
      static_for<8>([&](auto u) TESSERA_INLINE {
        const __m256i p = _mm256_loadu_si256((const __m256i*)(blk + 128 + 32 * (8 * chunk + u)));
        const __m256i q = high ? _mm256_and_si256(_mm256_srli_epi16(p, 4), low4) : _mm256_and_si256(p, low4);
        static_for<NT>([&](auto t) TESSERA_INLINE {
          s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(q, broadcast32(x.q[t] + sb * 256 + 32 * j + 4 * u)));
          keep_in_register(s16[t]);
        });
      });
      const __m256 sc = _mm256_load_ps(dsc[j]), mn = _mm256_load_ps(dmn[j]);
      const int64_t b = sb * 8 + j;
      static_for<NT>([&](auto t) TESSERA_INLINE {
        const __m256 qx = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16[t], ones));
        acc[t] = _mm256_fmadd_ps(qx, _mm256_mul_ps(sc, _mm256_broadcast_ss(x.scale[t] + b)), acc[t]);
        acc[t] = _mm256_fnmadd_ps(mn, _mm256_broadcast_ss(x.block_sum[t] + b), acc[t]);
      });
    });
  }
  static_for<NT>([&](auto t) TESSERA_INLINE { _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + group * 8, acc[t]); });
}

// Q6_Kx8 (kernels/interleave.h), one group of 8 rows for NT tokens. value = d·sc_j·(q − 32) per 16-value
// sub-block j, q in [0, 63] from a ql nibble and two qh bits. Vector (quarter Q, unit u) of half n holds values
// 128n + 32Q + 4u..+3 of the 8 rows: ql unit 16n + 8(Q % 2) + u (nibble Q / 2) and qh unit 8n + u (bits 2Q,
// 2Q + 1), so activation block b = 4n + Q holds sub-blocks 2b and 2b + 1. Per block and token: two vpmaddubsw
// add in int16 (at most 2·2·63·127 = 32004), vpmaddwd by the sub-block's scale widens them; the −32 offset is
// 32·Σ sc_j·(Σx over sub-block j) from the activations' 16-value sums, all exact in int32; one conversion and
// one FMA per block. The same operations for every token whatever NT is (batch invariance).
template <int NT>
__attribute__((noinline, flatten)) void tile_q6_kx8(const MatmulArgs& a, int64_t t0, int64_t group) {
  constexpr int kBlockBytes = 1680;  // 8 fp16 d, then 52 vectors: 32 of ql, 16 of qh, 4 of scales
  const int64_t nsb = a.n_in / 256;
  const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
  // Each 32-bit lane's low int16 copied to its high one: a row's scale for both halves of a vpmaddwd pair.
  const __m256i dup16 = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13,
                                         0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);
  const TileActs<NT> x(a, t0);
  __m256 acc[NT];
  static_for<NT>([&](auto t) TESSERA_INLINE { acc[t] = _mm256_setzero_ps(); });
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk = group_block(a, group, sb, kBlockBytes);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)blk));
    const uint8_t* ql = blk + 16;
    const uint8_t* qh = ql + 32 * 32;
    const uint8_t* scales = qh + 16 * 32;
    // Per sub-block j: the 8 rows' scales sign-extended to int32 (lane l = row l), as (sc, sc) int16 pairs for
    // the products, and per block b as (sc_2b, sc_2b+1) pairs for the offset.
    alignas(32) __m256i sc_pair[16], offset_pair[8];
    static_for<4>([&](auto k) TESSERA_INLINE {
      const __m256i v = _mm256_loadu_si256((const __m256i*)(scales + 32 * k));
      __m256i sc32[4];
      static_for<4>([&](auto i) TESSERA_INLINE { sc32[i] = _mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * i), 24); });
      static_for<4>([&](auto i) TESSERA_INLINE { sc_pair[4 * k + i] = _mm256_shuffle_epi8(sc32[i], dup16); });
      static_for<2>([&](auto i) TESSERA_INLINE {
        offset_pair[2 * k + i] =
            _mm256_blend_epi16(sc32[2 * i], _mm256_slli_epi32(sc32[2 * i + 1], 16), 0xaa);
      });
    });
    static_for<8>([&](auto bi) TESSERA_INLINE {
      constexpr int b = decltype(bi)::value, n = b / 4, quarter = b % 4;
      __m256i s32[NT];
      static_for<NT>([&](auto t) TESSERA_INLINE { s32[t] = _mm256_setzero_si256(); });
      static_for<4>([&](auto up) TESSERA_INLINE {  // unit pairs: sub-block 2b for pairs 0-1, 2b + 1 for pairs 2-3
        __m256i q[2];
        static_for<2>([&](auto i) TESSERA_INLINE {
          constexpr int u = 2 * decltype(up)::value + decltype(i)::value;
          const __m256i l = _mm256_loadu_si256((const __m256i*)(ql + 32 * (16 * n + 8 * (quarter % 2) + u)));
          const __m256i h = _mm256_loadu_si256((const __m256i*)(qh + 32 * (8 * n + u)));
          const __m256i lo = quarter < 2 ? _mm256_and_si256(l, low4) : _mm256_and_si256(_mm256_srli_epi16(l, 4), low4);
          __m256i hb;
          if constexpr (quarter == 0) hb = _mm256_slli_epi16(h, 4);
          if constexpr (quarter == 1) hb = _mm256_slli_epi16(h, 2);
          if constexpr (quarter == 2) hb = h;
          if constexpr (quarter == 3) hb = _mm256_srli_epi16(h, 2);
          q[i] = _mm256_or_si256(lo, _mm256_and_si256(hb, bits45));
        });
        const __m256i sc = sc_pair[2 * b + decltype(up)::value / 2];
        static_for<NT>([&](auto t) TESSERA_INLINE {
          const int8_t* xu = x.q[t] + sb * 256 + 32 * b + 8 * decltype(up)::value;
          const __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(q[0], broadcast32(xu)),
                                               _mm256_maddubs_epi16(q[1], broadcast32(xu + 4)));
          s32[t] = _mm256_add_epi32(s32[t], _mm256_madd_epi16(s16, sc));
          keep_in_register(s32[t]);
        });
      });
      const int64_t blk32 = sb * 8 + b;
      static_for<NT>([&](auto t) TESSERA_INLINE {
        const __m256i offset = _mm256_madd_epi16(offset_pair[b], broadcast32(x.sum16[t] + 2 * blk32));
        const __m256i sum = _mm256_sub_epi32(s32[t], _mm256_slli_epi32(offset, 5));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(d, _mm256_broadcast_ss(x.scale[t] + blk32)),
                                 acc[t]);
      });
    });
  }
  static_for<NT>([&](auto t) TESSERA_INLINE { _mm256_storeu_ps(a.y + (t0 + t) * a.n_out + group * 8, acc[t]); });
}

// A group of Q8_0x8 or I8x8 rows without a partner (an odd group count in a thread's rows) takes 8 tokens a
// tile: each weight vector's |w| is computed once for all of them, and the 8
// int32 accumulators (8 more fp32 ones for Q8_0, which GCC spills once a block) still leave registers for the
// weights. 1-core, in-cache 512-token products ran 7 % faster than with 4-token tiles (Q8_0 112 → 119 GOP/s,
// I8 126 → 133). The 4-bit and 6-bit kinds keep 4: their int16 and fp32 accumulators and bit masks would not
// fit with 8.
constexpr int kWideTileTokens = 8;

// Q8_0x8 and I8x8 batches go two groups (16 rows) by 4 tokens (tile_q8_0x8_pair, tile_i8x8_pair): one
// activation broadcast per two products. 512-token prefills ran 2-23 % faster at model level than with 8-token
// single-group tiles (docs/performance.md).
constexpr int kPairTileTokens = 4;

inline bool takes_wide_tiles(KernelType type) { return type == KernelType::Q8_0x8 || type == KernelType::I8x8; }

template <int NT>
void tile_interleaved(const MatmulArgs& a, int64_t t0, int64_t group) {
  if (a.type == KernelType::Q8_0x8) return tile_q8_0x8<NT>(a, t0, group);
  if (a.type == KernelType::I8x8) return tile_i8x8<NT>(a, t0, group);
  if constexpr (NT <= kTileTokens) {
    if (a.type == KernelType::Q4_Kx8) return tile_q4_kx8<NT>(a, t0, group);
    if (a.type == KernelType::Q6_Kx8) return tile_q6_kx8<NT>(a, t0, group);
    tile_q4_0x8<NT>(a, t0, group);
  }
}

// Token blocks outside, groups of 8 rows inside: a block's quantized activations (|x| and x, ~192 KiB) stay in
// L2 while every group passes over them, and a group's weights (a few tens of KiB) stay in L1 across the block's
// tiles. With all tokens in one pass, a long prompt's activations (2 MiB for 512 tokens of 2048) would stream
// from L3 once per group: 512-token products ran ~8% slower than 32-token ones per token. Weights are re-read
// once per block, from L3 for a matrix that fits there. Tiles give the same bits wherever they start.
// Tiles of 3, 2 or 1 tokens for the last tokens [t, te) of a block in group g.
inline void remainder_tiles(const MatmulArgs& a, int64_t t, int64_t te, int64_t g) {
  switch (te - t) {
    case 3: tile_interleaved<3>(a, t, g); break;
    case 2: tile_interleaved<2>(a, t, g); break;
    case 1: tile_interleaved<1>(a, t, g); break;
    default: break;
  }
}

void interleaved_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  const bool wide = takes_wide_tiles(a.type);
  const auto pair_tile =
      a.type == KernelType::Q8_0x8 ? tile_q8_0x8_pair<kPairTileTokens> : tile_i8x8_pair<kPairTileTokens>;
  const int64_t block =
      std::max<int64_t>(kWideTileTokens, (192 << 10) / (2 * a.n_in) / kWideTileTokens * kWideTileTokens);
  for (int64_t tb = 0; tb < a.n_tokens; tb += block) {
    const int64_t te = std::min(a.n_tokens, tb + block);
    int64_t g = row_begin / 8;
    if (wide && te - tb >= kPairTileTokens) {
      for (; g + 2 <= row_end / 8; g += 2) {
        int64_t t = tb;
        for (; t + kPairTileTokens <= te; t += kPairTileTokens) pair_tile(a, t, g);
        remainder_tiles(a, t, te, g);
        remainder_tiles(a, t, te, g + 1);
      }
    }
    for (; g < row_end / 8; ++g) {
      int64_t t = tb;
      if (wide)
        for (; t + kWideTileTokens <= te; t += kWideTileTokens) tile_interleaved<kWideTileTokens>(a, t, g);
      for (; t + kTileTokens <= te; t += kTileTokens) tile_interleaved<kTileTokens>(a, t, g);
      remainder_tiles(a, t, te, g);
    }
  }
}

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

inline __m256 u8x8_to_ps(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p)));
}

// Q4_K (144 bytes per 256 values): value = d·sc·q − dmin·m per 32-value sub-block, q in [0, 15]. The q·x part
// is an unsigned × signed product; the min part needs only the activation block sums, 8 per super-block.
template <int NT, int NR>
void tile_q4_k(const TileCtx& c) {
  const int64_t nsb = c.a.n_in / 256, nb = c.a.n_in / 32;
  __m256 acc[NT][NR], mins[NT][NR];
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) acc[t][r] = mins[t][r] = _mm256_setzero_ps();
  const int8_t* xq[NT];
  const float* xd[NT];
  const float* xs[NT];
  UNROLL
  for (int t = 0; t < NT; ++t) {
    xq[t] = c.a.xq.q + (c.t0 + t) * c.a.n_in;
    xd[t] = c.a.xq.scale + (c.t0 + t) * nb;
    xs[t] = c.a.xq.block_sum + (c.t0 + t) * nb;
  }
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    alignas(32) float dsc[NR][8];
    const uint8_t* qs[NR];
    UNROLL
    for (int r = 0; r < NR; ++r) {
      const uint8_t* blk = c.wrow(r) + sb * 144;
      prefetch(blk + kPrefetchBytes);
      prefetch(blk + kPrefetchBytes + 64);
      prefetch(blk + kPrefetchBytes + 128);
      uint8_t sc[8], mn[8];
      q4_k_unpack_scales(blk + 4, sc, mn);
      _mm256_store_ps(dsc[r], _mm256_mul_ps(u8x8_to_ps(sc), _mm256_set1_ps(half_to_float(blk))));
      const __m256 mv = _mm256_mul_ps(u8x8_to_ps(mn), _mm256_set1_ps(half_to_float(blk + 2)));
      UNROLL
      for (int t = 0; t < NT; ++t) mins[t][r] = _mm256_fmadd_ps(mv, _mm256_loadu_ps(xs[t] + sb * 8), mins[t][r]);
      qs[r] = blk + 16;
    }
    UNROLL
    for (int g = 0; g < 4; ++g) {
      __m256i lo[NR], hi[NR];
      UNROLL
      for (int r = 0; r < NR; ++r) {
        const __m256i raw = _mm256_loadu_si256((const __m256i*)(qs[r] + 32 * g));
        lo[r] = _mm256_and_si256(raw, mask);
        hi[r] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
      }
      const int64_t b = sb * 8 + 2 * g;
      UNROLL
      for (int t = 0; t < NT; ++t) {
        const __m256i x0 = _mm256_loadu_si256((const __m256i*)(xq[t] + b * 32));
        const __m256i x1 = _mm256_loadu_si256((const __m256i*)(xq[t] + b * 32 + 32));
        const float d0 = xd[t][b], d1 = xd[t][b + 1];
        UNROLL
        for (int r = 0; r < NR; ++r) {
          acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_u8s8(lo[r], x0)),
                                      _mm256_set1_ps(dsc[r][2 * g] * d0), acc[t][r]);
          acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_u8s8(hi[r], x1)),
                                      _mm256_set1_ps(dsc[r][2 * g + 1] * d1), acc[t][r]);
        }
      }
    }
  }
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) c.out(t, r) = hsum(acc[t][r]) - hsum(mins[t][r]);
}

// Q6_K (210 bytes per 256 values): ql[128] low nibbles, qh[64] two high bits, 16 int8 scales (one per 16
// values), fp16 d; value = d·sc·(q − 32), q in [0, 63]. Scales are applied in the integer pairwise add
// (maddubs then madd by the scale instead of by one); the −32 offset through the activations' 16-value sums.
template <int NT, int NR>
void tile_q6_k(const TileCtx& c) {
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

// Tessera INT8: int8 rows with one fp32 scale per row; activations carry one scale per token, so the whole
// row reduces in exact int32 arithmetic and is scaled once.
template <int NT, int NR>
void tile_i8(const TileCtx& c) {
  const int64_t n = c.a.n_in, nc = n / 32;
  __m256i acc[NT][NR];
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_si256();
  const int8_t* xq[NT];
  UNROLL
  for (int t = 0; t < NT; ++t) xq[t] = c.a.xq.q + (c.t0 + t) * n;
  const int8_t* wr[NR];
  UNROLL
  for (int r = 0; r < NR; ++r) wr[r] = reinterpret_cast<const int8_t*>(c.wrow(r));
  for (int64_t i = 0; i < nc; ++i) {
    __m256i ws[NR], wa[NR];
    UNROLL
    for (int r = 0; r < NR; ++r) {
      prefetch(reinterpret_cast<const uint8_t*>(wr[r] + i * 32) + kPrefetchBytes);
      ws[r] = _mm256_loadu_si256((const __m256i*)(wr[r] + i * 32));
      wa[r] = _mm256_abs_epi8(ws[r]);
    }
    UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m256i xv = _mm256_loadu_si256((const __m256i*)(xq[t] + i * 32));
      UNROLL
      for (int r = 0; r < NR; ++r)
        acc[t][r] = _mm256_add_epi32(acc[t][r], dot_u8s8(wa[r], _mm256_sign_epi8(xv, ws[r])));
    }
  }
  UNROLL
  for (int t = 0; t < NT; ++t) {
    UNROLL
    for (int r = 0; r < NR; ++r) {
      int64_t sum = hsum_epi32(acc[t][r]);
      for (int64_t i = nc * 32; i < n; ++i) sum += static_cast<int32_t>(wr[r][i]) * xq[t][i];
      const float rs = c.a.row_scales[c.r0 + r];
      float y = static_cast<float>(sum) * (rs * c.a.xq.scale[c.t0 + t]);
      // Outlier columns (int8_outliers.h): fp32 products with the weight row, which is still in L1.
      if (c.a.xq.outlier_count != nullptr && c.a.xq.outlier_count[c.t0 + t] > 0) {
        const int64_t base = (c.t0 + t) * n;
        float f = 0.0f;
        for (int32_t k = 0; k < c.a.xq.outlier_count[c.t0 + t]; ++k)
          f += c.a.xq.outlier_val[base + k] * static_cast<float>(wr[r][c.a.xq.outlier_col[base + k]]);
        y += rs * f;
      }
      c.out(t, r) = y;
    }
  }
}

// Float weights: 8 values converted to fp32 per step, FMA with fp32 activations.
struct F32Load {
  static __m256 load(const uint8_t* row, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i); }
  static float one(const uint8_t* row, int64_t i) { return reinterpret_cast<const float*>(row)[i]; }
};
struct F16Load {
  static __m256 load(const uint8_t* row, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(row + 2 * i)));
  }
  static float one(const uint8_t* row, int64_t i) { return half_to_float(row + 2 * i); }
};
struct BF16Load {
  static __m256 load(const uint8_t* row, int64_t i) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
  static float one(const uint8_t* row, int64_t i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

template <typename Load, int NT, int NR>
void tile_float(const TileCtx& c) {
  const int64_t n = c.a.n_in, nv = n / 8;
  __m256 acc[NT][NR];
  UNROLL
  for (int t = 0; t < NT; ++t)
    UNROLL
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  const float* x[NT];
  UNROLL
  for (int t = 0; t < NT; ++t) x[t] = c.a.x + (c.t0 + t) * n;
  const uint8_t* wr[NR];
  UNROLL
  for (int r = 0; r < NR; ++r) wr[r] = c.wrow(r);
  for (int64_t i = 0; i < nv * 8; i += 8) {
    __m256 wv[NR];
    UNROLL
    for (int r = 0; r < NR; ++r) {
      if (i % 16 == 0) prefetch(wr[r] + sizeof(float) * i + kPrefetchBytes);
      wv[r] = Load::load(wr[r], i);
    }
    UNROLL
    for (int t = 0; t < NT; ++t) {
      const __m256 xv = _mm256_loadu_ps(x[t] + i);
      UNROLL
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_fmadd_ps(wv[r], xv, acc[t][r]);
    }
  }
  UNROLL
  for (int t = 0; t < NT; ++t) {
    UNROLL
    for (int r = 0; r < NR; ++r) {
      float sum = hsum(acc[t][r]);
      for (int64_t i = nv * 8; i < n; ++i) sum += Load::one(wr[r], i) * x[t][i];
      c.out(t, r) = sum;
    }
  }
}

// ---- tiling over the row range ------------------------------------------------------------------------------

template <int NT, int NR>
void tile(const TileCtx& c) {
  switch (c.a.type) {
    case KernelType::F32: return tile_float<F32Load, NT, NR>(c);
    case KernelType::F16: return tile_float<F16Load, NT, NR>(c);
    case KernelType::BF16: return tile_float<BF16Load, NT, NR>(c);
    case KernelType::I8: return tile_i8<NT, NR>(c);
    case KernelType::Q8_0: return tile_block32<Q8_0Block, NT, NR>(c);
    case KernelType::Q4_0: return tile_block32<Q4_0Block, NT, NR>(c);
    case KernelType::Q4_K: return tile_q4_k<NT, NR>(c);
    case KernelType::Q6_K: return tile_q6_k<NT, NR>(c);
    case KernelType::Q4_0x8:
    case KernelType::Q8_0x8:
    case KernelType::I8x8:
    case KernelType::Q4_Kx8:
    case KernelType::Q6_Kx8: return;  // interleaved_rows
    case KernelType::F32x32:
    case KernelType::F16x32:
    case KernelType::BF16x32:
    case KernelType::FP8x32: return;  // panel_matmul_rows (matmul_panel_inl.h)
  }
}

template <int NT>
void tiles_for_tokens(const MatmulArgs& a, int64_t t0, int64_t r_begin, int64_t r_end, const float* wd,
                      int64_t wd_stride) {
  constexpr int kNR = rows_per_tile(NT);
  // wd covers rows from r_begin on.
  auto ctx = [&](int64_t r) { return TileCtx{a, t0, r, wd ? wd + (r - r_begin) * wd_stride : nullptr, wd_stride}; };
  int64_t r = r_begin;
  for (; r + kNR <= r_end; r += kNR) tile<NT, kNR>(ctx(r));
  for (; r < r_end; ++r) tile<NT, 1>(ctx(r));
}

// Q8_0 / Q4_0 blocks start with an fp16 scale. In batches the scales of a chunk's rows are converted once,
// for all of its token tiles.
inline int block32_bytes(KernelType type) {
  return type == KernelType::Q8_0 ? Q8_0Block::kBytes : type == KernelType::Q4_0 ? Q4_0Block::kBytes : 0;
}

void matmul_rows_impl(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  if (a.type == KernelType::Q4_0x8 || a.type == KernelType::Q8_0x8 || a.type == KernelType::I8x8 ||
      a.type == KernelType::Q4_Kx8 || a.type == KernelType::Q6_Kx8) {
    return interleaved_rows(a, row_begin, row_end);
  }
  // Rows are taken in chunks whose weights stay in L1/L2 while every token tile passes over them: the weights
  // are read from memory once per call, the (smaller) activations once per chunk from cache.
  int64_t chunk = static_cast<int64_t>(48 * 1024 / (a.row_bytes + 1)) / 4 * 4;
  chunk = chunk < 4 ? 4 : chunk > 256 ? 256 : chunk;
  const int block_bytes = block32_bytes(a.type);
  const int64_t nb = a.n_in / 32;
  thread_local std::vector<float> wd_scratch;  // grown on demand and kept: steady state allocates nothing
  float* wd = nullptr;
  if (block_bytes != 0 && a.n_tokens > 1) {
    if (wd_scratch.size() < static_cast<size_t>(chunk * nb)) wd_scratch.resize(static_cast<size_t>(chunk * nb));
    wd = wd_scratch.data();
  }
  for (int64_t rc = row_begin; rc < row_end; rc += chunk) {
    const int64_t rce = rc + chunk < row_end ? rc + chunk : row_end;
    if (wd != nullptr) {
      for (int64_t r = rc; r < rce; ++r) {
        const uint8_t* row = a.w + static_cast<size_t>(r) * a.row_bytes;
        for (int64_t b = 0; b < nb; ++b) wd[(r - rc) * nb + b] = half_to_float(row + b * block_bytes);
      }
    }
    int64_t t = 0;
    for (; t + kTileTokens <= a.n_tokens; t += kTileTokens) tiles_for_tokens<kTileTokens>(a, t, rc, rce, wd, nb);
    switch (a.n_tokens - t) {
      case 3: tiles_for_tokens<3>(a, t, rc, rce, wd, nb); break;
      case 2: tiles_for_tokens<2>(a, t, rc, rce, wd, nb); break;
      case 1: tiles_for_tokens<1>(a, t, rc, rce, wd, nb); break;
      default: break;
    }
  }
}
