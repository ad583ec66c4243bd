// 512-bit batch tiles for the interleaved integer types (Q8_0x8, Q4_0x8, I8x8, Q4_Kx8, Q6_Kx8), included by matmul_avx512.cpp
// after matmul_x86_inl.h, inside its namespace.
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
template <typename Vector>
TESSERA_INLINE inline void keep_in_zmm(Vector& v) {
  asm("" : "+v"(v));
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
// block b at [b·NT + t]: scale (d_x), block_sum (d_x·Σx, Q4_K's mins) and start, the accumulator's first value
// (−128·Σx for Q8_0, −8·Σx for Q4_0; Q6_K: the block's two 16-value sums as an int16 pair). I8: per token,
// scale[t] and start[t] = −128·Σx over the row.
struct PackedTile {
  const int32_t* q;
  const float* scale;
  const float* block_sum;
  const int32_t* start;
};

template <ZmmKind K>
constexpr bool per_row_acts() {
  return K == ZmmKind::I8;
}

// Packs tokens [t0, t0 + nt) (PackedTile's layout for nt tokens) into q, scale, block_sum and start.
template <ZmmKind K>
void pack_tile(const MatmulArgs& a, int64_t t0, int nt, int32_t* q, float* scale, float* block_sum, int32_t* start) {
  const int64_t nb = a.n_in / 32;
  for (int t = 0; t < nt; ++t) {
    const int8_t* xq = a.xq.q + (t0 + t) * a.n_in;
    for (int64_t d = 0; d < nb * 8; ++d) std::memcpy(&q[d * nt + t], xq + 4 * d, 4);
    if constexpr (per_row_acts<K>()) {
      scale[t] = a.xq.scale[t0 + t];
      // In wrapping arithmetic: the lanes' true sums fit int32, the offset alone need not (NaN inputs).
      start[t] = static_cast<int32_t>(static_cast<uint32_t>(a.xq.row_sum[t0 + t]) * 0xffffff80u);
    } else {
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t i = (t0 + t) * nb + b;
        scale[b * nt + t] = a.xq.scale[i];
        if constexpr (K == ZmmKind::Q4_K) block_sum[b * nt + t] = a.xq.block_sum[i];
        const int16_t* sums = a.xq.sum16 + 2 * i;
        if constexpr (K == ZmmKind::Q6_K) {
          std::memcpy(&start[b * nt + t], sums, 4);
        } else {
          start[b * nt + t] = (K == ZmmKind::Q4_0 ? -8 : -128) * (int32_t{sums[0]} + sums[1]);
        }
      }
    }
  }
}

// Software pipelining of the weight stream: while a tile column computes, it requests the next column's
// weights into L2, so that only the first column of a call waits for memory. Without it the first token tile of
// each column read its weights from memory and the others from L2, the two never overlapping: a 16-token
// product (three tiles) took as long as one weight read plus two tiles' compute. Each of a column's token tiles
// requests its share of the next column, a block (all 2·NZ groups of it) per iteration of its block loop.
struct Ahead {
  const uint8_t* next = nullptr;  // the next column's first block of this tile's share
  int64_t blocks = 0;             // blocks in the share
};

template <int NZ, int kBlockBytes>
TESSERA_INLINE inline void prefetch_ahead(const Ahead& ahead, int64_t b, size_t group_stride) {
  if (b >= ahead.blocks) return;
  const uint8_t* at = ahead.next + b * kBlockBytes;
  static_for<2 * NZ>([&](auto g) TESSERA_INLINE {
    static_for<(kBlockBytes + 63) / 64>([&](auto line) TESSERA_INLINE {
      _mm_prefetch(reinterpret_cast<const char*>(at + g * group_stride + 64 * line), _MM_HINT_T1);
    });
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
template <ZmmKind K, int NZ, int NT>
__attribute__((noinline, flatten)) void tile_zmm(const MatmulArgs& a, const PackedTile x, int64_t t0, int64_t group,
                                                 const Ahead ahead) {
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
          const __m512i xl = _mm512_set1_epi32(xb[j * NT + t]), xh = _mm512_set1_epi32(xb[(4 + j) * NT + t]);
          static_for<NZ>([&](auto z) {
            s32[z][t] = _mm512_dpbusd_epi32(s32[z][t], lo[z], xl);
            s32[z][t] = _mm512_dpbusd_epi32(s32[z][t], hi[z], xh);
            keep_in_zmm(s32[z][t]);
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
          const __m512i xv = _mm512_set1_epi32(xb[j * NT + t]);
          static_for<NZ>([&](auto z) {
            s32[z][t] = _mm512_dpbusd_epi32(s32[z][t], w[z], xv);
            keep_in_zmm(s32[z][t]);
          });
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

// Q4_K's unpacked scales for one tile column: per super-block sb, sub-block j and register z, the 16 rows'
// d·sc_j at scales + ((sb·8 + j)·NZ + z)·16 and their dmin·m_j at the same place in mins. q4_kx8_scales' values
// (the 256-bit tile's), unpacked once per column and token block for all of its token tiles, which had each
// unpacked them again per super-block.
struct Q4KColumnScales {
  const float* scales;
  const float* mins;
};

template <int NZ>
Q4KColumnScales unpack_q4_k_column(const MatmulArgs& a, int64_t group) {
  thread_local std::vector<float> scales, mins;
  const int64_t nsb = a.n_in / zmm_block_values<ZmmKind::Q4_K>();
  const size_t n = size_t(nsb) * 8 * NZ * 16;
  if (scales.size() < n) scales.resize(n), mins.resize(n);
  const size_t gs = 8 * a.row_bytes;
  const uint8_t* wz[NZ];
  register_groups<NZ>(a, group, wz);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    static_for<NZ>([&](auto z) TESSERA_INLINE {
      alignas(32) float dsc[2][8][8], dmn[2][8][8];
      const uint8_t* blk = wz[z] + sb * zmm_block_bytes<ZmmKind::Q4_K>();
      q4_kx8_scales(blk, dsc[0], dmn[0]);
      q4_kx8_scales(blk + gs, dsc[1], dmn[1]);
      for (int j = 0; j < 8; ++j) {
        const size_t at = ((size_t(sb) * 8 + size_t(j)) * NZ + z) * 16;
        for (int h = 0; h < 2; ++h) {
          std::memcpy(&scales[at + 8 * size_t(h)], dsc[h][j], 8 * sizeof(float));
          std::memcpy(&mins[at + 8 * size_t(h)], dmn[h][j], 8 * sizeof(float));
        }
      }
    });
  }
  return {scales.data(), mins.data()};
}

// Q4_Kx8 (kernels/interleave.h) for 16·NZ rows and NT tokens: tile_q4_kx8's scheme with dpbusd. Per 32-value
// sub-block j, 8 vectors of nibbles (values 4u..4u+3 of the 16 rows) times those 4 activation bytes broadcast
// sum into int32 directly (the 256-bit tile's int16 sum widened by vpmaddwd is the same integer), then one FMA
// for the q·x part and one for the min part, in the 256-bit tile's order, with the column's unpacked scales.
template <int NZ, int NT>
__attribute__((noinline, flatten)) void tile_q4_kx8_zmm(const MatmulArgs& a, const PackedTile x, int64_t t0,
                                                        int64_t group, const Ahead ahead, const Q4KColumnScales cs) {
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
    prefetch_ahead<NZ, kBlockBytes>(ahead, sb, gs);
    static_for<8>([&](auto j) TESSERA_INLINE {
      constexpr int chunk = decltype(j)::value / 2;
      constexpr bool high = decltype(j)::value % 2 == 1;
      const int64_t b = sb * 8 + j;
      const int32_t* xb = x.q + b * 8 * NT;
      __m512i s32[NZ][NT];
      static_for<NZ>([&](auto z) TESSERA_INLINE {
        static_for<NT>([&](auto t) TESSERA_INLINE { s32[z][t] = _mm512_setzero_si512(); });
      });
      static_for<8>([&](auto u) TESSERA_INLINE {
        __m512i q[NZ];
        static_for<NZ>([&](auto z) TESSERA_INLINE {
          const __m512i p = load_group_pair(blk[z] + 128 + 32 * (8 * chunk + u), gs);
          q[z] = high ? _mm512_and_si512(_mm512_srli_epi16(p, 4), low4) : _mm512_and_si512(p, low4);
        });
        static_for<NT>([&](auto t) TESSERA_INLINE {
          const __m512i xv = _mm512_set1_epi32(xb[u * NT + t]);
          static_for<NZ>([&](auto z) TESSERA_INLINE {
            s32[z][t] = _mm512_dpbusd_epi32(s32[z][t], q[z], xv);
            keep_in_zmm(s32[z][t]);
          });
        });
      });
      static_for<NZ>([&](auto z) TESSERA_INLINE {
        const size_t at = ((size_t(sb) * 8 + j) * NZ + z) * 16;
        const __m512 sc = _mm512_loadu_ps(cs.scales + at);
        const __m512 mn = _mm512_loadu_ps(cs.mins + at);
        static_for<NT>([&](auto t) TESSERA_INLINE {
          const __m512 qx = _mm512_cvtepi32_ps(s32[z][t]);
          acc[z][t] = _mm512_fmadd_ps(qx, _mm512_mul_ps(sc, _mm512_set1_ps(x.scale[b * NT + t])), acc[z][t]);
          acc[z][t] = _mm512_fnmadd_ps(mn, _mm512_set1_ps(x.block_sum[b * NT + t]), acc[z][t]);
        });
      });
    });
  }
  store_tile<NZ, NT>(a, acc, t0, group);
}

// Q6_Kx8 (kernels/interleave.h) for 16·NZ rows and NT tokens: tile_q6_kx8's operations on registers twice as
// wide (vpmaddubsw and vpmaddwd by the sub-block scales, exact int16/int32 as there; with the scales applied per
// 16 values in the integer step, dpbusd would save nothing).
template <int NZ, int NT>
__attribute__((noinline, flatten)) void tile_q6_kx8_zmm(const MatmulArgs& a, const PackedTile x, int64_t t0,
                                                        int64_t group, const Ahead ahead) {
  constexpr int kBlockBytes = zmm_block_bytes<ZmmKind::Q6_K>();
  const int64_t nsb = a.n_in / zmm_block_values<ZmmKind::Q6_K>();
  const size_t gs = 8 * a.row_bytes;
  const uint8_t* wz[NZ];
  register_groups<NZ>(a, group, wz);
  const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
  // Each 32-bit lane's low int16 copied to its high one: a row's scale for both halves of a vpmaddwd pair.
  const __m512i dup16 = _mm512_set4_epi32(0x0d0c0d0c, 0x09080908, 0x05040504, 0x01000100);
  __m512 acc[NZ][NT];
  zero_tile(acc);
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* blk[NZ];
    static_for<NZ>([&](auto z) TESSERA_INLINE { blk[z] = wz[z] + sb * kBlockBytes; });
    prefetch_ahead<NZ, kBlockBytes>(ahead, sb, gs);
    __m512 d[NZ];
    alignas(64) __m512i sc_pair[NZ][16], offset_pair[NZ][8];
    static_for<NZ>([&](auto z) TESSERA_INLINE {
      const uint8_t* gz = blk[z];
      d[z] = load_group_pair_scales(gz, gs);
      const uint8_t* scales = gz + 16 + 48 * 32;  // after the 8 fp16 d, 32 vectors of ql and 16 of qh
      static_for<4>([&](auto k) TESSERA_INLINE {
        const __m512i v = load_group_pair(scales + 32 * k, gs);
        __m512i sc32[4];
        static_for<4>([&](auto i) TESSERA_INLINE { sc32[i] = _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * i), 24); });
        static_for<4>([&](auto i) TESSERA_INLINE { sc_pair[z][4 * k + i] = _mm512_shuffle_epi8(sc32[i], dup16); });
        static_for<2>([&](auto i) TESSERA_INLINE {
          offset_pair[z][2 * k + i] =
              _mm512_mask_blend_epi16(0xaaaaaaaa, sc32[2 * i], _mm512_slli_epi32(sc32[2 * i + 1], 16));
        });
      });
    });
    static_for<8>([&](auto bi) TESSERA_INLINE {
      constexpr int b = decltype(bi)::value, n = b / 4, quarter = b % 4;
      const int64_t blk32 = sb * 8 + b;
      const int32_t* xb = x.q + blk32 * 8 * NT;
      __m512i s32[NZ][NT];
      static_for<NZ>([&](auto z) TESSERA_INLINE {
        static_for<NT>([&](auto t) TESSERA_INLINE { s32[z][t] = _mm512_setzero_si512(); });
      });
      static_for<4>([&](auto up) TESSERA_INLINE {  // unit pairs: sub-block 2b for pairs 0-1, 2b + 1 for pairs 2-3
        __m512i q[NZ][2];
        static_for<NZ>([&](auto z) TESSERA_INLINE {
          const uint8_t* ql = blk[z] + 16;
          const uint8_t* qh = ql + 32 * 32;
          static_for<2>([&](auto i) TESSERA_INLINE {
            constexpr int u = 2 * decltype(up)::value + decltype(i)::value;
            const __m512i l = load_group_pair(ql + 32 * (16 * n + 8 * (quarter % 2) + u), gs);
            const __m512i h = load_group_pair(qh + 32 * (8 * n + u), gs);
            const __m512i lo = quarter < 2 ? _mm512_and_si512(l, low4) : _mm512_and_si512(_mm512_srli_epi16(l, 4), low4);
            __m512i hb;
            if constexpr (quarter == 0) hb = _mm512_slli_epi16(h, 4);
            if constexpr (quarter == 1) hb = _mm512_slli_epi16(h, 2);
            if constexpr (quarter == 2) hb = h;
            if constexpr (quarter == 3) hb = _mm512_srli_epi16(h, 2);
            q[z][i] = _mm512_or_si512(lo, _mm512_and_si512(hb, bits45));
          });
        });
        static_for<NT>([&](auto t) TESSERA_INLINE {
          const __m512i x0 = _mm512_set1_epi32(xb[2 * up * NT + t]), x1 = _mm512_set1_epi32(xb[(2 * up + 1) * NT + t]);
          static_for<NZ>([&](auto z) TESSERA_INLINE {
            const __m512i s16 = _mm512_add_epi16(_mm512_maddubs_epi16(q[z][0], x0), _mm512_maddubs_epi16(q[z][1], x1));
            s32[z][t] = _mm512_add_epi32(s32[z][t], _mm512_madd_epi16(s16, sc_pair[z][2 * b + decltype(up)::value / 2]));
            keep_in_zmm(s32[z][t]);
          });
        });
      });
      static_for<NT>([&](auto t) TESSERA_INLINE {
        const __m512i sums = _mm512_set1_epi32(x.start[blk32 * NT + t]);
        const __m512 dx = _mm512_set1_ps(x.scale[blk32 * NT + t]);
        static_for<NZ>([&](auto z) TESSERA_INLINE {
          const __m512i offset = _mm512_madd_epi16(offset_pair[z][b], sums);
          const __m512i sum = _mm512_sub_epi32(s32[z][t], _mm512_slli_epi32(offset, 5));
          acc[z][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d[z], dx), acc[z][t]);
        });
      });
    });
  }
  store_tile<NZ, NT>(a, acc, t0, group);
}

template <ZmmKind K, int NZ, int NT>
TESSERA_INLINE inline void zmm_tile(const MatmulArgs& a, const PackedTile& x, int64_t t0, int64_t group,
                                    const Ahead& ahead, const Q4KColumnScales& q4_k) {
  if constexpr (K == ZmmKind::Q4_K) {
    tile_q4_kx8_zmm<NZ, NT>(a, x, t0, group, ahead, q4_k);
  } else if constexpr (K == ZmmKind::Q6_K) {
    tile_q6_kx8_zmm<NZ, NT>(a, x, t0, group, ahead);
  } else {
    tile_zmm<K, NZ, NT>(a, x, t0, group, ahead);
  }
}

// Tokens per zmm tile. Q8_0, Q4_0 and the K-quants keep an fp32 and an int32 accumulator per (register, token);
// I8 only the int32 one, so it takes twice the tokens. Chosen by matmul_roofline_bench (docs/performance.md).
template <ZmmKind K>
constexpr int zmm_tile_tokens() {
  return K == ZmmKind::I8 ? 8 : K == ZmmKind::Q8_0 || K == ZmmKind::Q4_0 ? 6 : 4;
}

// One token block's activations packed tile by tile (PackedTile), in this thread's scratch.
template <ZmmKind K>
struct PackedBlock {
  static constexpr int kNT = zmm_tile_tokens<K>();
  int64_t tb = 0, te = 0, per_token = 0, side_per_token = 0;  // dwords and side values per token
  int32_t* q = nullptr;
  float* scale = nullptr;
  float* block_sum = nullptr;
  int32_t* start = nullptr;

  PackedBlock(const MatmulArgs& a, int64_t tb_, int64_t te_) : tb(tb_), te(te_) {
    thread_local std::vector<int32_t> q_buf, start_buf;
    thread_local std::vector<float> scale_buf, block_sum_buf;
    per_token = a.n_in / 4;
    side_per_token = per_row_acts<K>() ? 1 : a.n_in / 32;
    const size_t n = static_cast<size_t>(te - tb);
    auto grow_to = [](auto& v, size_t size) {
      if (v.size() < size) v.resize(size);
      return v.data();
    };
    q = grow_to(q_buf, n * static_cast<size_t>(per_token));
    scale = grow_to(scale_buf, n * static_cast<size_t>(side_per_token));
    block_sum = grow_to(block_sum_buf, n * static_cast<size_t>(side_per_token));
    start = grow_to(start_buf, n * static_cast<size_t>(side_per_token));
    for (int64_t t = tb; t < te; t += kNT) {
      const int nt = static_cast<int>(std::min<int64_t>(kNT, te - t));
      const int64_t i = t - tb;
      pack_tile<K>(a, t, nt, q + i * per_token, scale + i * side_per_token, block_sum + i * side_per_token,
                   start + i * side_per_token);
    }
  }

  PackedTile tile(int64_t t) const {
    const int64_t i = t - tb;
    return {q + i * per_token, scale + i * side_per_token, block_sum + i * side_per_token, start + i * side_per_token};
  }
};

// The block's tokens for one tile column (NZ registers from `group`) in tiles of kNT, then one narrower tile;
// tile i of n requests blocks [i·nb/n, (i+1)·nb/n) of the next column (Ahead).
template <ZmmKind K, int NZ>
void zmm_tile_column(const MatmulArgs& a, const PackedBlock<K>& x, int64_t group) {
  constexpr int kNT = PackedBlock<K>::kNT;
  const int64_t nb = a.n_in / zmm_block_values<K>();
  const int64_t n_tiles = (x.te - x.tb + kNT - 1) / kNT;
  const uint8_t* next = a.w + static_cast<size_t>(group + 2 * NZ) * 8 * a.row_bytes;
  auto ahead = [&](int64_t t) {
    const int64_t i = (t - x.tb) / kNT, lo = i * nb / n_tiles, hi = (i + 1) * nb / n_tiles;
    return Ahead{next + lo * zmm_block_bytes<K>(), hi - lo};
  };
  Q4KColumnScales q4_k{};
  if constexpr (K == ZmmKind::Q4_K) q4_k = unpack_q4_k_column<NZ>(a, group);
  int64_t t = x.tb;
  for (; t + kNT <= x.te; t += kNT) zmm_tile<K, NZ, kNT>(a, x.tile(t), t, group, ahead(t), q4_k);
  static_for<kNT - 1>([&](auto n) {
    constexpr int kRest = kNT - 1 - decltype(n)::value;  // kNT - 1, ..., 1
    if (x.te - t == kRest) zmm_tile<K, NZ, kRest>(a, x.tile(t), t, group, ahead(t), q4_k);
  });
}

// A token block's packed activations (one byte per value) take at most this much of L2. Each tile column
// reads its weights once per block; with the next column requested ahead (Ahead), 512 and 768 KiB blocks
// measured within 3 % of 192 KiB for 512-token products of 5632x2048 and 2048x5632 Q8_0x8 and I8x8.
constexpr int64_t kZmmBlockBytes = 192 << 10;

template <ZmmKind K>
void zmm_interleaved_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  constexpr int64_t kNT = zmm_tile_tokens<K>();
  const int64_t block = std::max<int64_t>(kNT, kZmmBlockBytes / a.n_in / kNT * kNT);
  const int64_t g_end = row_end / 8;
  for (int64_t tb = 0; tb < a.n_tokens; tb += block) {
    const int64_t te = std::min(a.n_tokens, tb + block);
    const PackedBlock<K> x(a, tb, te);
    int64_t g = row_begin / 8;
    for (; g + 4 <= g_end; g += 4) zmm_tile_column<K, 2>(a, x, g);
    for (; g + 2 <= g_end; g += 2) zmm_tile_column<K, 1>(a, x, g);
    for (; g < g_end; ++g) {
      int64_t t = tb;
      for (; t + kTileTokens <= te; t += kTileTokens) tile_interleaved<kTileTokens>(a, t, g);
      remainder_tiles(a, t, te, g);
    }
  }
}

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

// Rows in chunks whose weights stay in L1/L2 while every token tile passes over them (as matmul_rows_impl).
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

// Whether a call takes the 512-bit tiles: float weights always (their reduction is defined by the 512-bit
// lanes at this level), the interleaved integer kinds in batches (decode streams weights at memory speed with
// the 256-bit tiles and their sign trick, which need no offset; both give the same bits). The K-quants' zmm
// tiles pay a fixed cost per tile column (Q4_K's scales unpacked for the column, Q6_K's wider unpacking) that
// only prompts amortize: TinyLlama, 2 threads, 256-bit against 512-bit tiles at 4 / 16 / 32 tokens per step,
// Q4_K 190 / 204 / 213 against 132 / 194 / 365 tok/s, Q6_K 124 / 132 / 143 against 59 / 143 / 164.
constexpr int64_t kZmmKQuantMinTokens = 32;

inline bool takes_zmm_tiles(const MatmulArgs& a) {
  switch (a.type) {
    case KernelType::F32:
    case KernelType::F16:
    case KernelType::BF16: return true;
    case KernelType::Q8_0x8:
    case KernelType::Q4_0x8:
    case KernelType::I8x8: return a.n_tokens >= 2;
    case KernelType::Q4_Kx8:
    case KernelType::Q6_Kx8: return a.n_tokens >= kZmmKQuantMinTokens;
    default: return false;
  }
}

void zmm_matmul_rows(const MatmulArgs& a, int64_t row_begin, int64_t row_end) {
  switch (a.type) {
    case KernelType::F32: return zmm_float_rows<F32LoadZmm>(a, row_begin, row_end);
    case KernelType::F16: return zmm_float_rows<F16LoadZmm>(a, row_begin, row_end);
    case KernelType::BF16: return zmm_float_rows<BF16LoadZmm>(a, row_begin, row_end);
    case KernelType::Q8_0x8: return zmm_interleaved_rows<ZmmKind::Q8_0>(a, row_begin, row_end);
    case KernelType::Q4_0x8: return zmm_interleaved_rows<ZmmKind::Q4_0>(a, row_begin, row_end);
    case KernelType::I8x8: return zmm_interleaved_rows<ZmmKind::I8>(a, row_begin, row_end);
    case KernelType::Q4_Kx8: return zmm_interleaved_rows<ZmmKind::Q4_K>(a, row_begin, row_end);
    case KernelType::Q6_Kx8: return zmm_interleaved_rows<ZmmKind::Q6_K>(a, row_begin, row_end);
    default: return matmul_rows_impl(a, row_begin, row_end);
  }
}
