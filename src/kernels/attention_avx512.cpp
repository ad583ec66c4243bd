// AVX-512 attention over block tables for every KV storage type, with the query rows in the vector lanes.
//
// A call's query rows (each token × each query head of one kv-head group: 64 for an 8-token prompt run of
// TinyLlama) are transposed once into Qt[d][row], 16 rows to a register. A score tile then takes RV such
// registers by P positions: per dimension d, RV loads of Qt and P broadcasts of key elements feed RV·P FMAs, all
// operands in L1 (dot products instead would load a key vector per FMA pair and pay a horizontal reduction per
// score; attention_avx2.cpp runs this design at 8 lanes). The softmax runs down the positions with 16 rows per
// register, so it needs no horizontal step either, and the value sums broadcast one weight per row against the
// value row's registers. The score tiles also keep each row's running maximum over the positions every row sees,
// and the weights of a chunk of values are normalized right before its value tiles, so the softmax reads the
// scores once (for the exponentials).
//
// Every element is defined without reference to the tile or the batch, so a token gives the same bits alone
// (decode) or inside any prompt run, in any split of heads:
//   score(r, p) = (Σ_d q[r][d] · k'[p][d]) · (1/√d), one FMA chain in d order, k' = k · (k's head scale);
//   w(r, p)     = e(r, p) · (1 / Σ_p e(r, p)), e = exp(score − max_p score), the sum in position order;
//   out(r, i)   = Σ_p w(r, p) · v'[p][i], one FMA chain in position order, v' = v · (v's head scale).
// Positions a row's token does not see are excluded, never weighted by zero.
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernels/attention_rows_ahead_inl.h"
#include "kernels/ops_kernels.h"
#include "kernels/static_for.h"

namespace tessera::kernels::avx512 {
namespace {
#include "kernels/simd_math_avx512_inl.h"

// Elements [i, i + 16) of a stored row as fp32 (without the head scale); lanes outside `m` are 0. A whole vector
// (every row but a head_dim's tail) takes the plain load: through the masked one, decode attention over 512
// positions took 1.4-1.8x as long (F16, one thread, Zen 5).
template <int T>
inline __m512 load16(const uint8_t* row, int64_t i, __mmask16 m, const float* fp8_table) {
  const bool whole = m == __mmask16(0xffff);
  if constexpr (T == kF32) {
    const float* p = reinterpret_cast<const float*>(row) + i;
    return whole ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
  } else if constexpr (T == kF16 || T == kBF16) {
    const uint8_t* p = row + 2 * i;
    const __m256i h = whole ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi16(m, p);
    if constexpr (T == kF16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    const __m128i b = whole ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i)) : _mm_maskz_loadu_epi8(m, row + i);
    if constexpr (T == kI8) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, _mm512_cvtepu8_epi32(b), fp8_table, 4);
  }
}

inline __mmask16 first_lanes(int64_t n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

// Positions per K or V chunk widened to fp32 at once; a multiple of every score tile's P (6, 8, 12, 16).
constexpr int64_t kChunk = 48;

// One kv head's K or V rows, read through the block table.
template <int T>
struct HeadRows : KvHeadSlice {
  // The head's slice of the row at `slot` of block `block_index`.
  const uint8_t* row(int64_t block_index, int64_t slot) const {
    return blocks[block_index] + slot * row_bytes + head_offset;
  }

  // The head scale of that row (I8 and FP8; 1 for the float types).
  float scale_of(int64_t block_index, int64_t slot) const {
    if constexpr (T == kI8 || T == kFP8) {
      float s;
      std::memcpy(&s, blocks[block_index] + scales_offset + (slot * n_head_kv + g) * 4, 4);
      return s;
    }
    return 1.0f;
  }

  // Calls fn(j, block_index, slot) for row j of positions [p0, p0 + n), each after the walk's request ahead
  // (`ahead`'s, when set). The block and slot advance with the position (one division per call), in locals.
  template <typename Fn>
  void for_each_row(int64_t p0, int64_t n, Fn&& fn) const {
    const int64_t size = block_size;
    int64_t block_index = p0 / size, slot = p0 % size;
    std::optional<RowsAhead> walk;
    if (ahead != nullptr) walk = ahead->from(p0);
    for (int64_t j = 0; j < n; ++j, slot = slot + 1 == size ? (++block_index, 0) : slot + 1) {
      if (walk) walk->request_next();
      fn(j, block_index, slot);
    }
  }

  // Rows of positions [p0, p0 + n), times their head scale, as fp32 into dst[j][stride] (zero past head_dim);
  // rows [n, kChunk) are zeroed. The row's address and scale are taken once per row, into locals: the stores to
  // dst may alias this struct's fields as far as the compiler knows, and it had reloaded them for every vector.
  void load(int64_t p0, int64_t n, int64_t stride, float* dst) const {
    const int64_t dim = head_dim;
    const float* const table = fp8_table;
    for_each_row(p0, n, [&](int64_t j, int64_t block_index, int64_t slot) {
      float* d = dst + j * stride;
      const uint8_t* r = row(block_index, slot);
      const __m512 scale = _mm512_set1_ps(scale_of(block_index, slot));
      for (int64_t i = 0; i < stride; i += 16) {
        const __m512 x = load16<T>(r, i, first_lanes(dim - i), table);
        _mm512_storeu_ps(d + i, (T == kI8 || T == kFP8) ? _mm512_mul_ps(x, scale) : x);
      }
    });
    std::memset(dst + n * stride, 0, size_t((kChunk - n) * stride) * sizeof(float));
  }

  // The addresses of rows [p0, p0 + n) into dst, with the requests ahead that load() makes.
  void addresses(int64_t p0, int64_t n, const uint8_t** dst) const {
    for_each_row(p0, n, [&](int64_t j, int64_t block_index, int64_t slot) { dst[j] = row(block_index, slot); });
  }
};

// The key rows' stride (floats) as a compile-time constant where it is a common head size's, and 0 (read at run
// time) for the others: with it known, a tile addresses its P positions' key elements from one register with
// constant offsets. At a run-time stride the compiler keeps P row pointers (16 and 12 in the one-row-register and
// packed tiles), more than the registers the tile leaves, and moved them through vector registers and the stack
// every dimension. One-token calls, kernels_bench on Zen 4, 8 ABBA rounds, time against a run-time stride:
// BM_Attention/2048/1 0.918 [0.851, 0.991], /8192/1 0.842 [0.763, 0.928], /256/1 0.944 [0.866, 1.029]; a TinyLlama
// Q4_0 decode step after 2000 positions 0.989 [0.978, 1.000] (1500 alternated rounds).
template <typename Fn>
void with_key_stride(int64_t stride, Fn&& fn) {
  switch (stride) {
    case 64: return fn(std::integral_constant<int64_t, 64>{});
    case 128: return fn(std::integral_constant<int64_t, 128>{});
    default: return fn(std::integral_constant<int64_t, 0>{});
  }
}

// Scores of RV registers of query rows (from qt, rows16 floats per dimension) against P key rows (k, k_stride
// floats apart, KS when with_key_stride knows it) into s[p · rows16 + 16 · rv]; the first `seen` positions (those
// every row sees) also raise the rows' running maxima mx[16 · rv + lane] (a maximum is exact in any order, so the
// softmax needs no pass for it).
template <int RV, int P, int64_t KS>
__attribute__((noinline)) void score_tile(const float* qt, int64_t rows16, int64_t head_dim, const float* k,
                                          int64_t k_stride, __m512 scale, int64_t seen, float* s, float* mx) {
  const int64_t stride = KS > 0 ? KS : k_stride;
  __m512 acc[RV][P];
  static_for<RV>([&](auto v) { static_for<P>([&](auto p) { acc[v][p] = _mm512_setzero_ps(); }); });
  for (int64_t d = 0; d < head_dim; ++d) {
    __m512 q[RV];
    static_for<RV>([&](auto v) { q[v] = _mm512_loadu_ps(qt + d * rows16 + 16 * v); });
    static_for<P>([&](auto p) {
      const __m512 kp = _mm512_set1_ps(k[p * stride + d]);
      static_for<RV>([&](auto v) { acc[v][p] = _mm512_fmadd_ps(q[v], kp, acc[v][p]); });
    });
  }
  static_for<RV>([&](auto v) {
    __m512 top = _mm512_loadu_ps(mx + 16 * v);
    static_for<P>([&](auto p) {
      const __m512 score = _mm512_mul_ps(acc[v][p], scale);
      _mm512_storeu_ps(s + p * rows16 + 16 * v, score);
      if (p < seen) top = _mm512_max_ps(top, score);
    });
    _mm512_storeu_ps(mx + 16 * v, top);
  });
}

// Positions per score tile for RV row registers: RV·P accumulators, RV query registers and a broadcast within
// the 32 registers.
constexpr int score_tile_positions(int rv) { return rv == 4 ? 6 : rv == 3 ? 8 : rv == 2 ? 12 : 16; }

// A chunk's scores for row registers [rv0, rv0 + RV), over the tiles that hold its first n positions (the
// chunk's rows past n are zero; a last chunk's empty tiles had added ~8 % to a 512-token prompt's score work).
// Its first `seen` positions are seen by every row: they raise the maxima mx.
template <int RV>
void score_chunk(const float* qt, int64_t rows16, int64_t head_dim, const float* k, int64_t stride, float scale,
                 int64_t n, int64_t seen, float* s, float* mx) {
  constexpr int P = score_tile_positions(RV);
  static_assert(kChunk % P == 0);
  with_key_stride(stride, [&](auto known) {
    for (int64_t p = 0; p < n; p += P) {
      score_tile<RV, P, known>(qt, rows16, head_dim, k + p * stride, stride, _mm512_set1_ps(scale),
                               std::clamp<int64_t>(seen - p, 0, P), s + p * rows16, mx);
    }
  });
}

// Where value tiles read a chunk's V rows: fp32 rows `stride` floats apart (widened from the cache by
// HeadRows::load, zero past head_dim), ...
struct WidenedRows {
  const float* v;
  int64_t stride;
  __m512 load(int64_t p, int64_t col) const { return _mm512_loadu_ps(v + p * stride + col); }
};

// ... or F16 rows read where the cache holds them, one address per position, `dim` elements each (lanes past
// them zero, as a widened row's padding): the same fp32 values without the copy, which had taken a fifth of a
// one-token call's time over 2048 positions in cache (attend_one_token_packed's V rows; kernels_bench
// BM_Attention/2048/1 291-309 us against 314-421, and 0.98-0.99x a TinyLlama decode step after 512-2000
// positions, Zen 4).
struct F16Rows {
  const uint8_t* const* rows;
  int64_t dim;
  __m512 load(int64_t p, int64_t col) const { return load16<kF16>(rows[p], col, first_lanes(dim - col), nullptr); }
};

// Value sums of RO rows (weights w[p · rows16 + WS · ro]) over positions [0, n) of a chunk (its rows: src),
// columns [col, col + 16·NV) of the rows, into acc_mem's rows (acc_stride apart, acc_mem at column col); `first`
// starts from zero. WS > 1: rows that share their lanes with other kv heads' (attend_one_token_packed).
template <int RO, int NV, int WS = 1, typename Rows>
__attribute__((noinline)) void value_tile(const float* w, int64_t rows16, int64_t n, const Rows& src, int64_t col,
                                          float* acc_mem, int64_t acc_stride, bool first) {
  __m512 acc[RO][NV];
  static_for<RO>([&](auto r) {
    static_for<NV>([&](auto c) {
      acc[r][c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc_mem + r * acc_stride + 16 * c);
    });
  });
  for (int64_t p = 0; p < n; ++p) {
    __m512 wp[RO];
    static_for<RO>([&](auto r) { wp[r] = _mm512_set1_ps(w[p * rows16 + WS * r]); });
    static_for<NV>([&](auto c) {
      const __m512 vc = src.load(p, col + 16 * c);
      static_for<RO>([&](auto r) { acc[r][c] = _mm512_fmadd_ps(wp[r], vc, acc[r][c]); });
    });
  }
  static_for<RO>([&](auto r) {
    static_for<NV>([&](auto c) { _mm512_storeu_ps(acc_mem + r * acc_stride + 16 * c, acc[r][c]); });
  });
}

// Rows per value tile for NV column registers: RO·NV accumulators, RO weights and a value register.
constexpr int value_tile_rows(int nv) { return nv == 1 ? 12 : nv == 2 ? 9 : nv == 3 ? 7 : nv == 4 ? 6 : nv <= 6 ? 4 : 3; }
constexpr int kMaxValueRegisters = 8;

// Value sums of rows [0, n_rows) of one token (w: their weights' column, rows WS lanes apart) over a chunk, all
// columns.
template <int NV, int WS = 1, typename Rows>
void value_rows(const float* w, int64_t rows16, int64_t n_rows, int64_t n, const Rows& src, float* acc_mem,
                int64_t acc_stride, int64_t col, bool first) {
  constexpr int RO = value_tile_rows(NV);
  for_each_tile<RO>(0, n_rows, [&](auto rows, int64_t r) {
    value_tile<decltype(rows)::value, NV, WS>(w + WS * r, rows16, n, src, col, acc_mem + r * acc_stride + col,
                                              acc_stride, first);
  });
}

// value_rows over every column of the rows (stride floats, in steps of up to kMaxValueRegisters registers).
template <int WS = 1, typename Rows>
void value_rows_all_columns(const float* w, int64_t rows16, int64_t n_rows, int64_t n, const Rows& src,
                            int64_t stride, float* acc_mem, int64_t acc_stride, bool first) {
  for (int64_t col = 0; col < stride; col += 16 * kMaxValueRegisters) {
    const int64_t nv = std::min<int64_t>(kMaxValueRegisters, (stride - col) / 16);
    static_for<kMaxValueRegisters>([&](auto i) {
      if (nv == i + 1) value_rows<i + 1, WS>(w, rows16, n_rows, n, src, acc_mem, acc_stride, col, first);
    });
  }
}

// Requests the query rows of heads [h0, h1) of n_tokens tokens into the cache level `Hint` names: a prompt's
// queries lie in L3 or memory by the time its attention runs, and the transposition into Qt waited on them
// (~7.5 % of a 512-token prompt's attention, ~5 % with these requests).
template <_mm_hint Hint>
void request_queries(const float* q, int64_t q_stride, int64_t n_tokens, int64_t h0, int64_t h1, int64_t head_dim) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const auto* row = reinterpret_cast<const char*>(q + t * q_stride + h0 * head_dim);
    for (int64_t byte = 0; byte < (h1 - h0) * head_dim * 4; byte += 64) _mm_prefetch(row + byte, Hint);
  }
}

// ---- one token: several kv heads' query rows share a register ----------------------------------------------
// A call's rows in the lanes leave a decode step's registers mostly idle: one token has as many rows per kv head
// as the head has query heads (8 for TinyLlama, 4 for Llama-3-8B). So one token's call takes G kv heads in one
// register (G = 2 for up to 8 query heads each, 4 for up to 4): lane G·i + j is query head i of the pass's kv
// head j. The pass's K rows are interleaved element by element, dst[p][d][j], so that one broadcast of G floats
// (vpbroadcastq, vbroadcasti32x4) gives every lane its own head's key element. Each lane still runs exactly the
// operations of the definitions at the top, in the same order: a token's bits are those of any prompt run.

// Rows of positions [p0, p0 + n) of the G heads (heads[j] null: a lane group without heads, zeros) into
// dst[j][d][G] (row j's element d of head jj at dst[(j · stride + d) · G + jj]); rows [n, kChunk) are zeroed.
// heads[0] is never null; its `ahead` requests the rows ahead, as HeadRows::load's does.
template <int T, int G>
void load_interleaved(const HeadRows<T>* const (&heads)[G], int64_t p0, int64_t n, int64_t stride, float* dst) {
  const HeadRows<T>& lead = *heads[0];
  // The heads' fields in locals, each row's addresses once per position (HeadRows::load says why).
  const int64_t dim = lead.head_dim;
  const float* const fp8_table = lead.fp8_table;
  // Lane pairs, then (G = 4) 64-bit pairs: a0 b0 a1 b1 … and then a0 b0 c0 d0 a1 b1 c1 d1 ….
  const __m512i pair_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i pair_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512i quad_lo = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
  const __m512i quad_hi = _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
  lead.for_each_row(p0, n, [&](int64_t j, int64_t block_index, int64_t slot) {
    float* d = dst + j * stride * G;
    const uint8_t* rows[G];
    __m512 scales[G];
    static_for<G>([&](auto h) {
      rows[h] = heads[h] != nullptr ? heads[h]->row(block_index, slot) : nullptr;
      scales[h] = _mm512_set1_ps(heads[h] != nullptr ? heads[h]->scale_of(block_index, slot) : 0.0f);
    });
    for (int64_t i = 0; i < stride; i += 16) {
      const __mmask16 m = first_lanes(dim - i);
      __m512 x[G];
      static_for<G>([&](auto h) {
        if (rows[h] == nullptr) {
          x[h] = _mm512_setzero_ps();
        } else {
          x[h] = load16<T>(rows[h], i, m, fp8_table);
          if constexpr (T == kI8 || T == kFP8) x[h] = _mm512_mul_ps(x[h], scales[h]);
        }
      });
      float* at = d + i * G;
      const __m512 ab_lo = _mm512_permutex2var_ps(x[0], pair_lo, x[1]);
      const __m512 ab_hi = _mm512_permutex2var_ps(x[0], pair_hi, x[1]);
      if constexpr (G == 2) {
        _mm512_storeu_ps(at, ab_lo);
        _mm512_storeu_ps(at + 16, ab_hi);
      } else {
        const __m512 cd_lo = _mm512_permutex2var_ps(x[2], pair_lo, x[3]);
        const __m512 cd_hi = _mm512_permutex2var_ps(x[2], pair_hi, x[3]);
        _mm512_storeu_ps(at, _mm512_permutex2var_ps(ab_lo, quad_lo, cd_lo));
        _mm512_storeu_ps(at + 16, _mm512_permutex2var_ps(ab_lo, quad_hi, cd_lo));
        _mm512_storeu_ps(at + 32, _mm512_permutex2var_ps(ab_hi, quad_lo, cd_hi));
        _mm512_storeu_ps(at + 48, _mm512_permutex2var_ps(ab_hi, quad_hi, cd_hi));
      }
    }
  });
  std::memset(dst + n * stride * G, 0, size_t((kChunk - n) * stride * G) * sizeof(float));
}

// score_tile for one register of G kv heads' rows: the key element of P positions broadcast G floats at a time
// from the interleaved chunk (rows k_stride floats apart; KS, G times with_key_stride's, when known). The first
// `seen` positions (those before the chunk's zeroed rows) raise the maxima.
template <int P, int G, int64_t KS>
__attribute__((noinline)) void score_tile_interleaved(const float* qt, int64_t head_dim, const float* k,
                                                      int64_t k_stride_arg, __m512 scale, int64_t seen, float* s,
                                                      float* mx) {
  const int64_t k_stride = KS > 0 ? KS : k_stride_arg;
  __m512 acc[P];
  static_for<P>([&](auto p) { acc[p] = _mm512_setzero_ps(); });
  for (int64_t d = 0; d < head_dim; ++d) {
    const __m512 q = _mm512_loadu_ps(qt + d * 16);
    static_for<P>([&](auto p) {
      const float* e = k + p * k_stride + d * G;
      __m512 kp;
      if constexpr (G == 2) {
        int64_t pair;
        std::memcpy(&pair, e, sizeof(pair));
        kp = _mm512_castsi512_ps(_mm512_set1_epi64(pair));
      } else {
        kp = _mm512_castsi512_ps(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e))));
      }
      acc[p] = _mm512_fmadd_ps(q, kp, acc[p]);
    });
  }
  __m512 top = _mm512_loadu_ps(mx);
  static_for<P>([&](auto p) {
    const __m512 score = _mm512_mul_ps(acc[p], scale);
    _mm512_storeu_ps(s + p * 16, score);
    if (p < seen) top = _mm512_max_ps(top, score);
  });
  _mm512_storeu_ps(mx, top);
}

// One pass of attend_one_token_packed: G kv heads, kv head g0 + j with its query heads [h0[j], h0[j] + m[j]) (m[j] = 0:
// none in this call), and the pass's own part of the scratch.
template <int T, int G>
struct PackedPass {
  int64_t h0[G], m[G];
  std::optional<HeadRows<T>> keys[G], values[G];
  const HeadRows<T>* key_heads[G];
  float* qt;        // [head_dim][16]
  float* scores;    // [n_chunks · kChunk][16]
  float* outputs;   // [16][stride]
  float* lane_max;  // [16]
  __m512 inv_sum;   // 1 / Σ e of each lane
};

// One token's query heads [head_begin, head_end), whose kv heads hold at most 16 / G query heads each, in passes
// of G kv heads. The passes go through the positions together, chunk by chunk: each chunk's K (then V) rows come
// from memory once, for the first pass, whose requests ahead cover every head of the call, and the later passes
// find them in cache. One pass after another over all positions, a later pass read its rows again from L3 or
// memory once the context's rows outgrew L2 (kernels_bench's BM_AttentionDecodeCold, one thread, µs a layer,
// three alternations against passes that each request their rows ahead: F16, TinyLlama's heads, 2048 positions
// 338-489 against 372-596, 256 positions 65.5-79.9 against 77.9-98.9; I8 355-413 against 413-498; Llama-3-8B's
// heads level, 1158-1277 against 1063-1314). Every lane's operations and their order are those of a pass on its
// own. Scratch (attend_scratch_floats): the interleaved K (or a head's V, widened unless F16) chunk
// [kChunk][stride][G], then each pass's PackedPass arrays.
template <int T, int G>
void attend_one_token_packed(const float* q, const float* fp8_table, const uint8_t* const* k_blocks,
                             const uint8_t* const* v_blocks, int64_t block_size, int64_t scales_offset,
                             int64_t n_pos, int64_t n_head_kv, int64_t group, int64_t head_dim, float scale,
                             int64_t head_begin, int64_t head_end, const RowsAhead& keys_ahead,
                             const RowsAhead& values_ahead, float* scratch, float* out) {
  constexpr int P = 16;
  static_assert(kChunk % P == 0);
  const int64_t stride = (head_dim + 15) / 16 * 16;
  const int64_t n_chunks = (n_pos + kChunk - 1) / kChunk;
  float* chunk = scratch;
  float* pass_scratch = chunk + kChunk * stride * G;

  const int64_t g_begin = head_begin / group, g_end = (head_end - 1) / group + 1;
  thread_local std::vector<PackedPass<T, G>> passes;
  passes.clear();
  passes.reserve(size_t((g_end - g_begin + G - 1) / G));  // no reallocation below: key_heads point into passes
  for (int64_t g0 = g_begin; g0 < g_end; g0 += G) {
    PackedPass<T, G>& pass = passes.emplace_back();
    pass.qt = pass_scratch;
    pass.scores = pass.qt + head_dim * 16;
    pass.outputs = pass.scores + n_chunks * kChunk * 16;
    pass.lane_max = pass.outputs + 16 * stride;
    pass_scratch = pass.lane_max + 16;
    const bool first = g0 == g_begin;
    for (int j = 0; j < G; ++j) {
      const int64_t g = g0 + j;
      pass.h0[j] = std::max(head_begin, g * group);
      pass.m[j] = std::max<int64_t>(0, std::min(head_end, (g + 1) * group) - pass.h0[j]);
      pass.key_heads[j] = nullptr;
      if (pass.m[j] == 0) continue;
      pass.keys[j].emplace(HeadRows<T>{kv_head_slice<T>(k_blocks, block_size, scales_offset, n_head_kv, head_dim, g,
                                                        fp8_table, first && j == 0 ? &keys_ahead : nullptr)});
      pass.values[j].emplace(HeadRows<T>{kv_head_slice<T>(v_blocks, block_size, scales_offset, n_head_kv, head_dim,
                                                          g, fp8_table, first && j == 0 ? &values_ahead : nullptr)});
      pass.key_heads[j] = &*pass.keys[j];
    }
    std::fill(pass.qt, pass.qt + head_dim * 16, 0.0f);
    for (int j = 0; j < G; ++j) {
      for (int64_t i = 0; i < pass.m[j]; ++i) {
        const float* src = q + (pass.h0[j] + i) * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) pass.qt[d * 16 + G * i + j] = src[d];
      }
    }
    std::fill(pass.lane_max, pass.lane_max + 16, -INFINITY);
  }

  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t p0 = c * kChunk, n = std::min(kChunk, n_pos - p0);
    for (PackedPass<T, G>& pass : passes) {
      load_interleaved<T, G>(pass.key_heads, p0, n, stride, chunk);
      with_key_stride(stride, [&](auto known) {
        for (int64_t p = 0; p < n; p += P) {
          score_tile_interleaved<P, G, known * G>(pass.qt, head_dim, chunk + p * stride * G, stride * G,
                                                  _mm512_set1_ps(scale), std::min<int64_t>(P, n - p),
                                                  pass.scores + (p0 + p) * 16, pass.lane_max);
        }
      });
    }
  }

  // Softmax down the positions (every lane sees all n_pos), as attend_typed's; the weights' 1 / Σ e is applied
  // per chunk below, while the chunk's weights are in L1.
  for (PackedPass<T, G>& pass : passes) {
    const __m512 mx = _mm512_loadu_ps(pass.lane_max);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t p = 0; p < n_pos; ++p) {
      const __m512 e = exp_zmm(_mm512_sub_ps(_mm512_loadu_ps(pass.scores + p * 16), mx));
      _mm512_storeu_ps(pass.scores + p * 16, e);
      sum = _mm512_add_ps(sum, e);
    }
    pass.inv_sum = _mm512_div_ps(_mm512_set1_ps(1.0f), sum);
  }

  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t p0 = c * kChunk, n = std::min(kChunk, n_pos - p0);
    for (PackedPass<T, G>& pass : passes) {
      for (int64_t p = p0; p < p0 + n; ++p) {
        _mm512_storeu_ps(pass.scores + p * 16, _mm512_mul_ps(_mm512_loadu_ps(pass.scores + p * 16), pass.inv_sum));
      }
      for (int j = 0; j < G; ++j) {
        if (pass.m[j] == 0) continue;
        const float* w = pass.scores + p0 * 16 + j;
        float* acc = pass.outputs + j * stride;
        if constexpr (T == kF16) {  // F16Rows says why
          const uint8_t* rows[kChunk];
          pass.values[j]->addresses(p0, n, rows);
          value_rows_all_columns<G>(w, 16, pass.m[j], n, F16Rows{rows, head_dim}, stride, acc, G * stride, p0 == 0);
        } else {
          pass.values[j]->load(p0, n, stride, chunk);
          value_rows_all_columns<G>(w, 16, pass.m[j], n, WidenedRows{chunk, stride}, stride, acc, G * stride, p0 == 0);
        }
      }
    }
  }
  for (const PackedPass<T, G>& pass : passes) {
    for (int j = 0; j < G; ++j) {
      for (int64_t i = 0; i < pass.m[j]; ++i) {
        std::memcpy(out + (pass.h0[j] + i) * head_dim, pass.outputs + (G * i + j) * stride,
                    size_t(head_dim) * sizeof(float));
      }
    }
  }
}

template <int T>
void attend_typed(const float* q, int64_t q_stride, int64_t n_tokens, const float* fp8_table,
                  const uint8_t* const* k_blocks, const uint8_t* const* v_blocks, int64_t block_size,
                  int64_t scales_offset, int64_t n_pos, int64_t n_head, int64_t n_head_kv, int64_t head_dim,
                  float scale, int64_t head_begin, int64_t head_end, float* scratch, float* out, int64_t out_stride,
                  int64_t packed_kv_heads) {
  const int64_t group = n_head / n_head_kv;
  const int64_t stride = (head_dim + 15) / 16 * 16;  // fp32 K/V and output row stride, zero padded
  const int64_t last_n_pos = n_pos + n_tokens - 1;  // token i attends n_pos + i positions
  const int64_t n_chunks = (last_n_pos + kChunk - 1) / kChunk;
  const int64_t max_rows16 = (n_tokens * group + 15) / 16 * 16;
  // Scratch layout (attend_scratch_floats): Qt [head_dim][rows16], scores [n_chunks · kChunk][rows16], a K or V
  // chunk [kChunk][stride], outputs [rows][stride], the rows' score maxima [rows16] and 1 / Σ e [rows16].
  float* qt = scratch;
  float* scores = qt + head_dim * max_rows16;
  float* chunk = scores + n_chunks * kChunk * max_rows16;
  float* outputs = chunk + kChunk * stride;
  float* row_max = outputs + n_tokens * group * stride;
  float* row_inv = row_max + max_rows16;

  const RowsAhead keys_ahead(k_blocks, block_size, last_n_pos, n_head_kv, head_dim * element_bytes<T>(), head_begin,
                             head_end, group, request_scheme(n_tokens));
  const RowsAhead values_ahead(v_blocks, block_size, last_n_pos, n_head_kv, head_dim * element_bytes<T>(), head_begin,
                               head_end, group, request_scheme(n_tokens));
  // One token over more than one kv head: the heads share registers (attend_one_token_packed), G of them as
  // attention.h's attend_packed_kv_heads chose (passed in: ISA files include no inline functions, ops_kernels.h).
  if (n_tokens == 1 && head_begin / group != (head_end - 1) / group && packed_kv_heads > 1) {
    const auto packed = packed_kv_heads == 4 ? attend_one_token_packed<T, 4> : attend_one_token_packed<T, 2>;
    return packed(q, fp8_table, k_blocks, v_blocks, block_size, scales_offset, n_pos, n_head_kv, group, head_dim,
                  scale, head_begin, head_end, keys_ahead, values_ahead, scratch, out);
  }

  // The call's queries into L2 now, each next group's into L1 while the group before it runs.
  request_queries<_MM_HINT_T1>(q, q_stride, n_tokens, head_begin, head_end, head_dim);
  for (int64_t g = head_begin / group; g * group < head_end; ++g) {
    const int64_t h0 = std::max(head_begin, g * group), h1 = std::min(head_end, (g + 1) * group);
    const int64_t m = h1 - h0;  // row r = token (r / m), head h0 + r % m
    const int64_t n_rows = n_tokens * m, rows16 = (n_rows + 15) / 16 * 16, n_regs = rows16 / 16;
    const RowsAhead group_keys_ahead = keys_ahead.from_head(h0), group_values_ahead = values_ahead.from_head(h0);
    const HeadRows<T> keys{kv_head_slice<T>(k_blocks, block_size, scales_offset, n_head_kv, head_dim, g, fp8_table,
                                            &group_keys_ahead)};
    const HeadRows<T> values{kv_head_slice<T>(v_blocks, block_size, scales_offset, n_head_kv, head_dim, g, fp8_table,
                                              &group_values_ahead)};

    if (h1 < head_end) {
      request_queries<_MM_HINT_T0>(q, q_stride, n_tokens, h1, std::min(head_end, h1 + group), head_dim);
    }
    // Qt[d][row], row by row (a division per element, r / m and r % m, had cost a decode call more than its
    // scores at short contexts). A 16 x 16 transposition in registers measured no faster: the loads' latency
    // bounds it.
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t i = 0; i < m; ++i) {
        const float* src = q + t * q_stride + (h0 + i) * head_dim;
        float* dst = qt + t * m + i;
        for (int64_t d = 0; d < head_dim; ++d) dst[d * rows16] = src[d];
      }
    }
    for (int64_t d = 0; d < head_dim; ++d) std::fill(qt + d * rows16 + n_rows, qt + (d + 1) * rows16, 0.0f);

    const auto positions_in = [&](int64_t c) { return std::min(kChunk, last_n_pos - c * kChunk); };
    std::fill(row_max, row_max + rows16, -INFINITY);
    for (int64_t c = 0; c < n_chunks; ++c) {
      const int64_t p0 = c * kChunk;
      const int64_t n = positions_in(c), seen = std::clamp<int64_t>(n_pos - p0, 0, n);
      keys.load(p0, n, stride, chunk);
      float* s = scores + p0 * rows16;
      for (int64_t v0 = 0; v0 < n_regs; v0 += 4) {  // up to 4 row registers a tile
        static_for<4>([&](auto i) {
          if (std::min<int64_t>(4, n_regs - v0) == i + 1) {
            score_chunk<i + 1>(qt + 16 * v0, rows16, head_dim, chunk, stride, scale, n, seen, s + 16 * v0,
                               row_max + 16 * v0);
          }
        });
      }
    }

    // Softmax down the positions, 16 rows at a time; a lane's positions end at its token's n_pos. The maxima
    // over positions [0, n_pos), which every row sees, came with the scores.
    // The last position + 1 a register's rows see (their last row's token's n_pos).
    const auto register_end = [&](int64_t v) { return n_pos + (std::min(16 * v + 15, n_rows - 1)) / m; };
    for (int64_t v = 0; v < n_regs; ++v) {
      alignas(64) int32_t limit[16];
      for (int64_t l = 0; l < 16; ++l) {
        const int64_t r = 16 * v + l;
        limit[l] = r < n_rows ? static_cast<int32_t>(n_pos + r / m) : 0;
      }
      const __m512i lim = _mm512_load_si512(limit);
      const int64_t end = register_end(v);
      float* s = scores + 16 * v;
      __m512 mx = _mm512_loadu_ps(row_max + 16 * v);
      for (int64_t p = n_pos; p < end; ++p) {
        const __mmask16 seen = _mm512_cmplt_epi32_mask(_mm512_set1_epi32(static_cast<int32_t>(p)), lim);
        mx = _mm512_mask_max_ps(mx, seen, mx, _mm512_loadu_ps(s + p * rows16));
      }
      __m512 sum = _mm512_setzero_ps();
      for (int64_t p = 0; p < end; ++p) {
        const __mmask16 seen = _mm512_cmplt_epi32_mask(_mm512_set1_epi32(static_cast<int32_t>(p)), lim);
        const __m512 e = _mm512_maskz_mov_ps(seen, exp_zmm(_mm512_sub_ps(_mm512_loadu_ps(s + p * rows16), mx)));
        _mm512_storeu_ps(s + p * rows16, e);
        sum = _mm512_add_ps(sum, e);
      }
      _mm512_storeu_ps(row_inv + 16 * v, _mm512_div_ps(_mm512_set1_ps(1.0f), sum));
    }

    // Outputs: per chunk of values, each token's rows over the positions it sees (n_pos + token). The positions
    // of a chunk that every token sees (all before n_pos) take all rows of the call as one range, so the row
    // tiles run full across tokens (TinyLlama's 8 rows per token had left a 2-row tile per token, at half the
    // FMA rate of the 6-row one); each token's rows then go on over the positions only it and later tokens see.
    // Every output element still runs one FMA chain in position order.
    // Value sums of rows [0, n_rows_in) (weights w, accumulators acc) over the chunk's positions [j0, j0 + n).
    const auto value_sums = [&](const float* w, int64_t n_rows_in, int64_t j0, int64_t n, float* acc, bool start) {
      value_rows_all_columns(w + j0 * rows16, rows16, n_rows_in, n, WidenedRows{chunk + j0 * stride, stride}, stride,
                             acc, stride, start);
    };
    for (int64_t c = 0; c < n_chunks; ++c) {
      const int64_t p0 = c * kChunk;
      values.load(p0, positions_in(c), stride, chunk);
      // The chunk's weights e · (1 / Σ e), while they are in L1 for the value tiles.
      for (int64_t v = 0; v < n_regs; ++v) {
        const __m512 inv = _mm512_loadu_ps(row_inv + 16 * v);
        float* s = scores + 16 * v;
        for (int64_t p = p0, end = std::min(p0 + kChunk, register_end(v)); p < end; ++p) {
          _mm512_storeu_ps(s + p * rows16, _mm512_mul_ps(_mm512_loadu_ps(s + p * rows16), inv));
        }
      }
      const float* w = scores + p0 * rows16;
      const int64_t shared = std::min(kChunk, n_pos - p0);  // positions of the chunk every token sees
      if (shared > 0) value_sums(w, n_rows, 0, shared, outputs, p0 == 0);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const int64_t j0 = std::max<int64_t>(shared, 0), n = std::min(kChunk, n_pos + t - p0) - j0;
        if (n > 0) value_sums(w + t * m, m, j0, n, outputs + t * m * stride, p0 == 0 && j0 == 0);
      }
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      std::memcpy(out + (r / m) * out_stride + (h0 + r % m) * head_dim, outputs + r * stride,
                  size_t(head_dim) * sizeof(float));
    }
  }
}

}  // namespace

void attend(const float* q, int64_t q_stride, int64_t n_tokens, int kv_type, const float* fp8_table,
            const uint8_t* const* k_blocks, const uint8_t* const* v_blocks, int64_t block_size, int64_t scales_offset,
            int64_t n_pos, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, int64_t head_begin,
            int64_t head_end, float* scratch, float* out, int64_t out_stride, int64_t packed_kv_heads) {
  switch (kv_type) {
#define TESSERA_ATTEND_CASE(T)                                                                                 \
  case T:                                                                                                      \
    return attend_typed<T>(q, q_stride, n_tokens, fp8_table, k_blocks, v_blocks, block_size, scales_offset,    \
                           n_pos, n_head, n_head_kv, head_dim, scale, head_begin, head_end, scratch, out,      \
                           out_stride, packed_kv_heads);
    TESSERA_ATTEND_CASE(kF32)
    TESSERA_ATTEND_CASE(kF16)
    TESSERA_ATTEND_CASE(kBF16)
    TESSERA_ATTEND_CASE(kI8)
    TESSERA_ATTEND_CASE(kFP8)
#undef TESSERA_ATTEND_CASE
  }
}

}  // namespace tessera::kernels::avx512
