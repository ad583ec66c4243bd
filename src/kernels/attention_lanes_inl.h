// Attention with the query rows in the vector lanes, written once for both vector widths: attention_avx2.cpp
// instantiates it with 8 lanes (ymm), attention_avx512.cpp with 16 (zmm). A width is a traits struct `L` of the
// ISA file: the vector type and its operations (load, store, broadcast, fmadd, mul, max, ...), exp, the lane
// masks of the softmax, a register's worth of a stored row as fp32 (load_row), the one-token passes' interleaving
// store and group broadcast, and the tile sizes its register file allows. The tiling, indexing and remainder
// logic below is therefore the same code at both widths, and the kernel tests at the AVX2 level exercise what the
// AVX-512 level runs.
//
// A call's query rows (each token × each query head of one kv-head group: 64 for an 8-token prompt run of
// TinyLlama) are transposed once into Qt[d][row], L::kLanes rows to a register. A score tile then takes RV such
// registers by P positions: per dimension d, RV loads of Qt and P broadcasts of key elements feed RV·P FMAs, all
// operands in L1 (dot products instead would load a key vector per FMA pair and pay a horizontal reduction per
// score). The softmax runs down the positions a register of rows at a time, so it needs no horizontal step
// either, and the value sums broadcast one weight per row against the value row's registers. The score tiles also
// keep each row's running maximum over the positions every row sees, and the weights of a chunk of values are
// normalized right before its value tiles, so the softmax reads the scores once (for the exponentials).
//
// Every element is defined without reference to the tile, the width's tiling or the batch, so a token gives the
// same bits alone (decode) or inside any prompt run, in any split of heads:
//   score(r, p) = (Σ_d q[r][d] · k'[p][d]) · (1/√d), one FMA chain in d order, k' = k · (k's head scale);
//   w(r, p)     = e(r, p) · (1 / Σ_p e(r, p)), e = exp(score − max_p score), the sum in position order;
//   out(r, i)   = Σ_p w(r, p) · v'[p][i], one FMA chain in position order, v' = v · (v's head scale).
// Positions a row's token does not see are excluded, never weighted by zero. (The two widths' exp differ, so
// the levels agree with each other and the scalar reference to rounding, not in bits.)
//
// Anonymous namespace, for the reason matmul_ymm_inl.h gives.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernels/attention_rows_ahead_inl.h"
#include "kernels/static_for.h"

namespace tessera::kernels {
namespace {

// Positions per K or V chunk widened to fp32 at once; a multiple of every score tile's P at both widths (4, 6, 8,
// 12, 16).
constexpr int64_t kAttentionChunk = 48;

// One kv head's K or V rows, read through the block table.
template <typename L, int T>
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

  // Elements [i, i + L::kLanes) of a stored row as fp32 (zero past dim), times its head scale where the type has
  // one (I8, FP8): what load() and the one-token passes' load_interleaved widen a row with.
  static typename L::V row_part(const uint8_t* r, int64_t i, int64_t dim, const float* table, typename L::V scale) {
    const typename L::V x = L::template load_row<T>(r, i, dim, table);
    if constexpr (T == kI8 || T == kFP8) return L::mul(x, scale);
    return x;
  }

  // Rows of positions [p0, p0 + n), times their head scale, as fp32 into dst[j][stride] (zero past head_dim);
  // rows [n, kAttentionChunk) are zeroed. The row's address and scale are taken once per row, into locals: the
  // stores to dst may alias this struct's fields as far as the compiler knows, and it had reloaded them for every
  // vector.
  void load(int64_t p0, int64_t n, int64_t stride, float* dst) const {
    const int64_t dim = head_dim;
    const float* const table = fp8_table;
    for_each_row(p0, n, [&](int64_t j, int64_t block_index, int64_t slot) {
      float* d = dst + j * stride;
      const uint8_t* r = row(block_index, slot);
      const typename L::V scale = L::set1(scale_of(block_index, slot));
      for (int64_t i = 0; i < stride; i += L::kLanes) L::store(d + i, row_part(r, i, dim, table, scale));
    });
    std::memset(dst + n * stride, 0, size_t((kAttentionChunk - n) * stride) * sizeof(float));
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

// Scores of RV registers of query rows (from qt, rows_padded floats per dimension) against P key rows (k,
// k_stride floats apart, KS when with_key_stride knows it) into s[p · rows_padded + lanes · rv]; the first `seen`
// positions (those every row sees) also raise the rows' running maxima mx[lanes · rv + lane] (a maximum is exact
// in any order, so the softmax needs no pass for it).
template <typename L, int RV, int P, int64_t KS>
__attribute__((noinline)) void score_tile(const float* qt, int64_t rows_padded, int64_t head_dim, const float* k,
                                          int64_t k_stride, typename L::V scale, int64_t seen, float* s, float* mx) {
  using V = typename L::V;
  constexpr int kLanes = L::kLanes;
  const int64_t stride = KS > 0 ? KS : k_stride;
  V acc[RV][P];
  static_for<RV>([&](auto v) { static_for<P>([&](auto p) { acc[v][p] = L::zero(); }); });
  for (int64_t d = 0; d < head_dim; ++d) {
    V q[RV];
    static_for<RV>([&](auto v) { q[v] = L::load(qt + d * rows_padded + kLanes * v); });
    static_for<P>([&](auto p) {
      const V kp = L::broadcast(k + p * stride + d);
      static_for<RV>([&](auto v) { acc[v][p] = L::fmadd(q[v], kp, acc[v][p]); });
    });
  }
  static_for<RV>([&](auto v) {
    V top = L::load(mx + kLanes * v);
    static_for<P>([&](auto p) {
      const V score = L::mul(acc[v][p], scale);
      L::store(s + p * rows_padded + kLanes * v, score);
      if (p < seen) top = L::max(top, score);
    });
    L::store(mx + kLanes * v, top);
  });
}

// A chunk's scores for row registers [rv0, rv0 + RV), over the tiles that hold its first n positions (the
// chunk's rows past n are zero; a last chunk's empty tiles had added ~8 % to a 512-token prompt's score work).
// Its first `seen` positions are seen by every row: they raise the maxima mx.
template <typename L, int RV>
void score_chunk(const float* qt, int64_t rows_padded, int64_t head_dim, const float* k, int64_t stride, float scale,
                 int64_t n, int64_t seen, float* s, float* mx) {
  constexpr int P = L::score_tile_positions(RV);
  static_assert(kAttentionChunk % P == 0);
  with_key_stride(stride, [&](auto known) {
    for (int64_t p = 0; p < n; p += P) {
      score_tile<L, RV, P, known>(qt, rows_padded, head_dim, k + p * stride, stride, L::set1(scale),
                                  std::clamp<int64_t>(seen - p, 0, P), s + p * rows_padded, mx);
    }
  });
}

// Where value tiles read a chunk's V rows: fp32 rows `stride` floats apart (widened from the cache by
// HeadRows::load, zero past head_dim), ...
template <typename L>
struct WidenedRows {
  const float* v;
  int64_t stride;
  typename L::V load(int64_t p, int64_t col) const { return L::load(v + p * stride + col); }
};

// ... or F16 rows read where the cache holds them, one address per position, `dim` elements each (lanes past
// them zero, as a widened row's padding): the same fp32 values without the copy, which had taken a fifth of a
// one-token call's time over 2048 positions in cache (attend_one_token_packed's V rows; kernels_bench
// BM_Attention/2048/1 291-309 us against 314-421, and 0.98-0.99x a TinyLlama decode step after 512-2000
// positions, Zen 4, AVX-512).
template <typename L>
struct F16Rows {
  const uint8_t* const* rows;
  int64_t dim;
  typename L::V load(int64_t p, int64_t col) const { return L::template load_row<kF16>(rows[p], col, dim, nullptr); }
};

// Value sums of RO rows (weights w[p · rows_padded + WS · ro]) over positions [0, n) of a chunk (its rows: src),
// columns [col, col + lanes·NV) of the rows, into acc_mem's rows (acc_stride apart, acc_mem at column col);
// `first` starts from zero. WS > 1: rows that share their lanes with other kv heads' (attend_one_token_packed
// below).
template <typename L, int RO, int NV, int WS = 1, typename Rows>
__attribute__((noinline)) void value_tile(const float* w, int64_t rows_padded, int64_t n, const Rows& src,
                                          int64_t col, float* acc_mem, int64_t acc_stride, bool first) {
  using V = typename L::V;
  constexpr int kLanes = L::kLanes;
  V acc[RO][NV];
  static_for<RO>([&](auto r) {
    static_for<NV>([&](auto c) {
      acc[r][c] = first ? L::zero() : L::load(acc_mem + r * acc_stride + kLanes * c);
    });
  });
  for (int64_t p = 0; p < n; ++p) {
    V wp[RO];
    static_for<RO>([&](auto r) { wp[r] = L::broadcast(w + p * rows_padded + WS * r); });
    static_for<NV>([&](auto c) {
      const V vc = src.load(p, col + kLanes * c);
      static_for<RO>([&](auto r) { acc[r][c] = L::fmadd(wp[r], vc, acc[r][c]); });
    });
  }
  static_for<RO>([&](auto r) {
    static_for<NV>([&](auto c) { L::store(acc_mem + r * acc_stride + kLanes * c, acc[r][c]); });
  });
}

// Value sums of rows [0, n_rows) of a chunk (w: their weights' column, rows WS lanes apart) over its positions
// [0, n), every column of the rows (stride floats, in steps of up to L::kMaxValueRegisters registers).
template <typename L, int WS = 1, typename Rows>
void value_rows_all_columns(const float* w, int64_t rows_padded, int64_t n_rows, int64_t n, const Rows& src,
                            int64_t stride, float* acc_mem, int64_t acc_stride, bool first) {
  for (int64_t col = 0; col < stride; col += L::kLanes * L::kMaxValueRegisters) {
    const int64_t nv = std::min<int64_t>(L::kMaxValueRegisters, (stride - col) / L::kLanes);
    static_for<L::kMaxValueRegisters>([&](auto i) {
      if (nv != i + 1) return;
      constexpr int NV = i + 1, RO = L::value_tile_rows(NV);
      for_each_tile<RO>(0, n_rows, [&](auto rows, int64_t r) {
        value_tile<L, decltype(rows)::value, NV, WS>(w + WS * r, rows_padded, n, src, col,
                                                     acc_mem + r * acc_stride + col, acc_stride, first);
      });
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

// The call's query heads [head_begin, head_end) of n_tokens tokens (token i's queries at q + i · q_stride attend
// positions [0, n_pos + i)), one kv-head group after another, each group's rows in registers of L::kLanes.
// Scratch (attention.h's attend_scratch_floats): Qt [head_dim][rows_padded], scores [n_chunks · chunk][rows_padded],
// a K or V chunk [chunk][stride], outputs [rows][stride], the rows' score maxima and 1 / Σ e [rows_padded each].
template <typename L, int T>
void attend_groups(const float* q, int64_t q_stride, int64_t n_tokens, const float* fp8_table,
                   const uint8_t* const* k_blocks, const uint8_t* const* v_blocks, int64_t block_size,
                   int64_t scales_offset, int64_t n_pos, int64_t n_head_kv, int64_t group, int64_t head_dim,
                   float scale, int64_t head_begin, int64_t head_end, const RowsAhead& keys_ahead,
                   const RowsAhead& values_ahead, float* scratch, float* out, int64_t out_stride) {
  using V = typename L::V;
  constexpr int64_t kLanes = L::kLanes, kChunk = kAttentionChunk;
  const auto padded = [](int64_t x) { return (x + kLanes - 1) / kLanes * kLanes; };
  const int64_t stride = padded(head_dim);  // fp32 K/V and output row stride, zero padded
  const int64_t last_n_pos = n_pos + n_tokens - 1;  // token i attends n_pos + i positions
  const int64_t n_chunks = (last_n_pos + kChunk - 1) / kChunk;
  const int64_t max_rows_padded = padded(n_tokens * group);
  float* qt = scratch;
  float* scores = qt + head_dim * max_rows_padded;
  float* chunk = scores + n_chunks * kChunk * max_rows_padded;
  float* outputs = chunk + kChunk * stride;
  float* row_max = outputs + n_tokens * group * stride;
  float* row_inv = row_max + max_rows_padded;

  // The call's queries into L2 now, each next group's into L1 while the group before it runs.
  request_queries<_MM_HINT_T1>(q, q_stride, n_tokens, head_begin, head_end, head_dim);
  for (int64_t g = head_begin / group; g * group < head_end; ++g) {
    const int64_t h0 = std::max(head_begin, g * group), h1 = std::min(head_end, (g + 1) * group);
    const int64_t m = h1 - h0;  // row r = token (r / m), head h0 + r % m
    const int64_t n_rows = n_tokens * m, rows_padded = padded(n_rows), n_regs = rows_padded / kLanes;
    const RowsAhead group_keys_ahead = keys_ahead.from_head(h0), group_values_ahead = values_ahead.from_head(h0);
    const HeadRows<L, T> keys{kv_head_slice<T>(k_blocks, block_size, scales_offset, n_head_kv, head_dim, g,
                                               fp8_table, &group_keys_ahead)};
    const HeadRows<L, T> values{kv_head_slice<T>(v_blocks, block_size, scales_offset, n_head_kv, head_dim, g,
                                                 fp8_table, &group_values_ahead)};

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
        for (int64_t d = 0; d < head_dim; ++d) dst[d * rows_padded] = src[d];
      }
    }
    for (int64_t d = 0; d < head_dim; ++d) std::fill(qt + d * rows_padded + n_rows, qt + (d + 1) * rows_padded, 0.0f);

    const auto positions_in = [&](int64_t c) { return std::min(kChunk, last_n_pos - c * kChunk); };
    std::fill(row_max, row_max + rows_padded, -INFINITY);
    for (int64_t c = 0; c < n_chunks; ++c) {
      const int64_t p0 = c * kChunk;
      const int64_t n = positions_in(c), seen = std::clamp<int64_t>(n_pos - p0, 0, n);
      keys.load(p0, n, stride, chunk);
      float* s = scores + p0 * rows_padded;
      for (int64_t v0 = 0; v0 < n_regs; v0 += L::kMaxScoreRegisters) {  // up to kMaxScoreRegisters a tile
        static_for<L::kMaxScoreRegisters>([&](auto i) {
          if (std::min<int64_t>(L::kMaxScoreRegisters, n_regs - v0) == i + 1) {
            score_chunk<L, i + 1>(qt + kLanes * v0, rows_padded, head_dim, chunk, stride, scale, n, seen,
                                  s + kLanes * v0, row_max + kLanes * v0);
          }
        });
      }
    }

    // Softmax down the positions, a register of rows at a time; a lane's positions end at its token's n_pos. The
    // maxima over positions [0, n_pos), which every row sees, came with the scores.
    // The last position + 1 a register's rows see (their last row's token's n_pos).
    const auto register_end = [&](int64_t v) { return n_pos + (std::min(kLanes * v + kLanes - 1, n_rows - 1)) / m; };
    for (int64_t v = 0; v < n_regs; ++v) {
      alignas(64) int32_t limit[kLanes];
      for (int64_t l = 0; l < kLanes; ++l) {
        const int64_t r = kLanes * v + l;
        limit[l] = r < n_rows ? static_cast<int32_t>(n_pos + r / m) : 0;
      }
      const typename L::Limits lanes(limit);  // lanes.seen(p): the lanes whose token sees position p
      const int64_t end = register_end(v);
      float* s = scores + kLanes * v;
      V mx = L::load(row_max + kLanes * v);
      for (int64_t p = n_pos; p < end; ++p) mx = L::max_where(lanes.seen(p), mx, L::load(s + p * rows_padded));
      V sum = L::zero();
      for (int64_t p = 0; p < end; ++p) {
        const V e = L::zero_unless(lanes.seen(p), L::exp(L::sub(L::load(s + p * rows_padded), mx)));
        L::store(s + p * rows_padded, e);
        sum = L::add(sum, e);
      }
      L::store(row_inv + kLanes * v, L::div(L::set1(1.0f), sum));
    }

    // Outputs: per chunk of values, each token's rows over the positions it sees (n_pos + token). The positions
    // of a chunk that every token sees (all before n_pos) take all rows of the call as one range, so the row
    // tiles run full across tokens (TinyLlama's 8 rows per token had left a 2-row tile per token, at half the
    // FMA rate of the 6-row one); each token's rows then go on over the positions only it and later tokens see.
    // Every output element still runs one FMA chain in position order.
    // Value sums of rows [0, n_rows_in) (weights w, accumulators acc) over the chunk's positions [j0, j0 + n).
    const auto value_sums = [&](const float* w, int64_t n_rows_in, int64_t j0, int64_t n, float* acc, bool start) {
      value_rows_all_columns<L>(w + j0 * rows_padded, rows_padded, n_rows_in, n,
                                WidenedRows<L>{chunk + j0 * stride, stride}, stride, acc, stride, start);
    };
    for (int64_t c = 0; c < n_chunks; ++c) {
      const int64_t p0 = c * kChunk;
      values.load(p0, positions_in(c), stride, chunk);
      // The chunk's weights e · (1 / Σ e), while they are in L1 for the value tiles.
      for (int64_t v = 0; v < n_regs; ++v) {
        const V inv = L::load(row_inv + kLanes * v);
        float* s = scores + kLanes * v;
        for (int64_t p = p0, end = std::min(p0 + kChunk, register_end(v)); p < end; ++p) {
          L::store(s + p * rows_padded, L::mul(L::load(s + p * rows_padded), inv));
        }
      }
      const float* w = scores + p0 * rows_padded;
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

// ---- one token: several kv heads' query rows share a register ----------------------------------------------
// A call's rows in the lanes leave a decode step's registers mostly idle: one token has as many rows per kv head
// as the head has query heads (8 for TinyLlama, 4 for Llama-3-8B). So one token's call takes G kv heads in one
// register (16 lanes: G = 2 for up to 8 query heads each, 4 for up to 4; 8 lanes: G = 1 for up to 8, 2 for up to
// 4): lane G·i + j is query head i of the pass's kv head j. The pass's K rows are interleaved element by element,
// dst[p][d][j], so that one broadcast of G floats gives every lane its own head's key element. Each lane still
// runs exactly the operations of the definitions at the top, in the same order: a token's bits are those of any
// prompt run.

// Rows of positions [p0, p0 + n) of the G heads (heads[j] null: a lane group without heads, zeros) into
// dst[j][d][G] (row j's element d of head jj at dst[(j · stride + d) · G + jj]); rows [n, chunk) are zeroed.
// heads[0] is never null; its `ahead` requests the rows ahead, as HeadRows::load's does.
template <typename L, int T, int G>
void load_interleaved(const HeadRows<L, T>* const (&heads)[G], int64_t p0, int64_t n, int64_t stride, float* dst) {
  using V = typename L::V;
  const HeadRows<L, T>& lead = *heads[0];
  // The heads' fields in locals, each row's addresses once per position (HeadRows::load says why).
  const int64_t dim = lead.head_dim;
  const float* const fp8_table = lead.fp8_table;
  lead.for_each_row(p0, n, [&](int64_t j, int64_t block_index, int64_t slot) {
    float* d = dst + j * stride * G;
    const uint8_t* rows[G];
    V scales[G];
    static_for<G>([&](auto h) {
      rows[h] = heads[h] != nullptr ? heads[h]->row(block_index, slot) : nullptr;
      scales[h] = L::set1(heads[h] != nullptr ? heads[h]->scale_of(block_index, slot) : 0.0f);
    });
    for (int64_t i = 0; i < stride; i += L::kLanes) {
      V x[G];
      static_for<G>([&](auto h) {
        x[h] = rows[h] == nullptr ? L::zero() : HeadRows<L, T>::row_part(rows[h], i, dim, fp8_table, scales[h]);
      });
      L::template store_interleaved<G>(x, d + i * G);
    }
  });
  std::memset(dst + n * stride * G, 0, size_t((kAttentionChunk - n) * stride * G) * sizeof(float));
}

// score_tile for one register of G kv heads' rows: the key element of P positions broadcast G floats at a time
// from the interleaved chunk (rows k_stride floats apart; KS, G times with_key_stride's, when known). The first
// `seen` positions (those before the chunk's zeroed rows) raise the maxima.
template <typename L, int P, int G, int64_t KS>
__attribute__((noinline)) void score_tile_interleaved(const float* qt, int64_t head_dim, const float* k,
                                                      int64_t k_stride_arg, typename L::V scale, int64_t seen,
                                                      float* s, float* mx) {
  using V = typename L::V;
  constexpr int kLanes = L::kLanes;
  const int64_t k_stride = KS > 0 ? KS : k_stride_arg;
  V acc[P];
  static_for<P>([&](auto p) { acc[p] = L::zero(); });
  for (int64_t d = 0; d < head_dim; ++d) {
    const V q = L::load(qt + d * kLanes);
    static_for<P>([&](auto p) {
      acc[p] = L::fmadd(q, L::template broadcast_group<G>(k + p * k_stride + d * G), acc[p]);
    });
  }
  V top = L::load(mx);
  static_for<P>([&](auto p) {
    const V score = L::mul(acc[p], scale);
    L::store(s + p * kLanes, score);
    if (p < seen) top = L::max(top, score);
  });
  L::store(mx, top);
}

// One pass of attend_one_token_packed: G kv heads, kv head g0 + j with its query heads [h0[j], h0[j] + m[j])
// (m[j] = 0: none in this call), and the pass's own part of the scratch.
template <typename L, int T, int G>
struct PackedPass {
  int64_t h0[G], m[G];
  std::optional<HeadRows<L, T>> keys[G], values[G];
  const HeadRows<L, T>* key_heads[G];
  float* qt;              // [head_dim][lanes]
  float* scores;          // [n_chunks · chunk][lanes]
  float* outputs;         // [lanes][stride]
  float* lane_max;        // [lanes]
  typename L::V inv_sum;  // 1 / Σ e of each lane
};

// One token's query heads [head_begin, head_end), whose kv heads hold at most lanes / G query heads each, in passes
// of G kv heads. The passes go through the positions together, chunk by chunk: each chunk's K (then V) rows come
// from memory once, for the first pass, whose requests ahead cover every head of the call, and the later passes
// find them in cache. One pass after another over all positions, a later pass read its rows again from L3 or
// memory once the context's rows outgrew L2 (kernels_bench's BM_AttentionDecodeCold, one thread, µs a layer,
// three alternations against passes that each request their rows ahead, AVX-512: F16, TinyLlama's heads, 2048
// positions 338-489 against 372-596, 256 positions 65.5-79.9 against 77.9-98.9; I8 355-413 against 413-498;
// Llama-3-8B's heads level, 1158-1277 against 1063-1314). Every lane's operations and their order are those of a
// pass on its own. Scratch (attention.h's attend_scratch_floats): the interleaved K (or a head's V, widened unless
// F16 with L::kValueRowsInPlace) chunk [chunk][stride][G], then each pass's PackedPass arrays.
template <typename L, int T, int G>
void attend_one_token_packed(const float* q, const float* fp8_table, const uint8_t* const* k_blocks,
                             const uint8_t* const* v_blocks, int64_t block_size, int64_t scales_offset,
                             int64_t n_pos, int64_t n_head_kv, int64_t group, int64_t head_dim, float scale,
                             int64_t head_begin, int64_t head_end, const RowsAhead& keys_ahead,
                             const RowsAhead& values_ahead, float* scratch, float* out) {
  using V = typename L::V;
  using Pass = PackedPass<L, T, G>;
  constexpr int64_t kLanes = L::kLanes, kChunk = kAttentionChunk;
  constexpr int P = L::score_tile_positions(1);
  static_assert(kChunk % P == 0);
  const int64_t stride = (head_dim + kLanes - 1) / kLanes * kLanes;
  const int64_t n_chunks = (n_pos + kChunk - 1) / kChunk;
  float* chunk = scratch;
  float* pass_scratch = chunk + kChunk * stride * G;

  const int64_t g_begin = head_begin / group, g_end = (head_end - 1) / group + 1;
  thread_local std::vector<Pass> passes;
  passes.clear();
  passes.reserve(size_t((g_end - g_begin + G - 1) / G));  // no reallocation below: key_heads point into passes
  for (int64_t g0 = g_begin; g0 < g_end; g0 += G) {
    Pass& pass = passes.emplace_back();
    pass.qt = pass_scratch;
    pass.scores = pass.qt + head_dim * kLanes;
    pass.outputs = pass.scores + n_chunks * kChunk * kLanes;
    pass.lane_max = pass.outputs + kLanes * stride;
    pass_scratch = pass.lane_max + kLanes;
    const bool first = g0 == g_begin;
    for (int j = 0; j < G; ++j) {
      const int64_t g = g0 + j;
      pass.h0[j] = std::max(head_begin, g * group);
      pass.m[j] = std::max<int64_t>(0, std::min(head_end, (g + 1) * group) - pass.h0[j]);
      pass.key_heads[j] = nullptr;
      if (pass.m[j] == 0) continue;
      pass.keys[j].emplace(HeadRows<L, T>{kv_head_slice<T>(k_blocks, block_size, scales_offset, n_head_kv, head_dim,
                                                           g, fp8_table, first && j == 0 ? &keys_ahead : nullptr)});
      pass.values[j].emplace(HeadRows<L, T>{kv_head_slice<T>(v_blocks, block_size, scales_offset, n_head_kv,
                                                             head_dim, g, fp8_table,
                                                             first && j == 0 ? &values_ahead : nullptr)});
      pass.key_heads[j] = &*pass.keys[j];
    }
    std::fill(pass.qt, pass.qt + head_dim * kLanes, 0.0f);
    for (int j = 0; j < G; ++j) {
      for (int64_t i = 0; i < pass.m[j]; ++i) {
        const float* src = q + (pass.h0[j] + i) * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) pass.qt[d * kLanes + G * i + j] = src[d];
      }
    }
    std::fill(pass.lane_max, pass.lane_max + kLanes, -INFINITY);
  }

  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t p0 = c * kChunk, n = std::min(kChunk, n_pos - p0);
    for (Pass& pass : passes) {
      load_interleaved<L, T, G>(pass.key_heads, p0, n, stride, chunk);
      with_key_stride(stride, [&](auto known) {
        for (int64_t p = 0; p < n; p += P) {
          score_tile_interleaved<L, P, G, known * G>(pass.qt, head_dim, chunk + p * stride * G, stride * G,
                                                     L::set1(scale), std::min<int64_t>(P, n - p),
                                                     pass.scores + (p0 + p) * kLanes, pass.lane_max);
        }
      });
    }
  }

  // Softmax down the positions (every lane sees all n_pos), as attend_groups'; the weights' 1 / Σ e is applied
  // per chunk below, while the chunk's weights are in L1.
  for (Pass& pass : passes) {
    const V mx = L::load(pass.lane_max);
    V sum = L::zero();
    for (int64_t p = 0; p < n_pos; ++p) {
      const V e = L::exp(L::sub(L::load(pass.scores + p * kLanes), mx));
      L::store(pass.scores + p * kLanes, e);
      sum = L::add(sum, e);
    }
    pass.inv_sum = L::div(L::set1(1.0f), sum);
  }

  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t p0 = c * kChunk, n = std::min(kChunk, n_pos - p0);
    for (Pass& pass : passes) {
      for (int64_t p = p0; p < p0 + n; ++p) {
        L::store(pass.scores + p * kLanes, L::mul(L::load(pass.scores + p * kLanes), pass.inv_sum));
      }
      for (int j = 0; j < G; ++j) {
        if (pass.m[j] == 0) continue;
        const float* w = pass.scores + p0 * kLanes + j;
        float* acc = pass.outputs + j * stride;
        if constexpr (T == kF16 && L::kValueRowsInPlace) {  // F16Rows says why
          const uint8_t* rows[kChunk];
          pass.values[j]->addresses(p0, n, rows);
          value_rows_all_columns<L, G>(w, kLanes, pass.m[j], n, F16Rows<L>{rows, head_dim}, stride, acc,
                                       G * stride, p0 == 0);
        } else {
          pass.values[j]->load(p0, n, stride, chunk);
          value_rows_all_columns<L, G>(w, kLanes, pass.m[j], n, WidenedRows<L>{chunk, stride}, stride, acc,
                                       G * stride, p0 == 0);
        }
      }
    }
  }
  for (const Pass& pass : passes) {
    for (int j = 0; j < G; ++j) {
      for (int64_t i = 0; i < pass.m[j]; ++i) {
        std::memcpy(out + (pass.h0[j] + i) * head_dim, pass.outputs + (G * i + j) * stride,
                    size_t(head_dim) * sizeof(float));
      }
    }
  }
}

// One call of ops_kernels.h's attend at width L, for KV type T: the rows' requests ahead, then one token over
// several kv heads in passes of G kv heads a register (attend_one_token_packed), or the kv-head groups one after
// another (attend_groups). packed_kv_heads is attention.h's attend_packed_kv_heads (a 16-lane register's kv heads,
// 4 or 2 where a group fits, passed in: ISA files include no inline functions, ops_kernels.h); at 8 lanes a pass
// takes half as many, 2 kv heads a register for groups of up to 4 query heads and 1 for groups of 5 to 8. The
// passes run chunk by chunk together, so each chunk's rows come from memory once for all of them. Against the
// group-by-group path, Zen 4 at the AVX2 level: kernels_bench (one thread, 5 ABBA rounds) BM_AttentionDecodeCold
// 2048 positions 0.67x the time with Llama-3-8B's heads (two kv heads a register), 1.00x with TinyLlama's,
// BM_Attention/2048/1 0.79x; a TinyLlama Q4_0 decode step after 2000 positions 0.953x (607 alternated rounds,
// slower minutes) and 0.967x (93, faster), a batch-16 step after 512 0.962x, level after 32.
template <typename L, int T>
void attend_call(const float* q, int64_t q_stride, int64_t n_tokens, const float* fp8_table,
                 const uint8_t* const* k_blocks, const uint8_t* const* v_blocks, int64_t block_size,
                 int64_t scales_offset, int64_t n_pos, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale,
                 int64_t head_begin, int64_t head_end, float* scratch, float* out, int64_t out_stride,
                 int64_t packed_kv_heads) {
  const int64_t group = n_head / n_head_kv, last_n_pos = n_pos + n_tokens - 1;
  const RowsAhead keys_ahead(k_blocks, block_size, last_n_pos, n_head_kv, head_dim * element_bytes<T>(), head_begin,
                             head_end, group, request_scheme(n_tokens));
  const RowsAhead values_ahead(v_blocks, block_size, last_n_pos, n_head_kv, head_dim * element_bytes<T>(), head_begin,
                               head_end, group, request_scheme(n_tokens));
  if (n_tokens == 1 && head_begin / group != (head_end - 1) / group && packed_kv_heads > 1) {
    constexpr int kFourOf16 = 4 * L::kLanes / 16, kTwoOf16 = 2 * L::kLanes / 16;
    const auto packed = packed_kv_heads == 4 ? attend_one_token_packed<L, T, kFourOf16>
                                             : attend_one_token_packed<L, T, kTwoOf16>;
    return packed(q, fp8_table, k_blocks, v_blocks, block_size, scales_offset, n_pos, n_head_kv, group, head_dim,
                  scale, head_begin, head_end, keys_ahead, values_ahead, scratch, out);
  }
  attend_groups<L, T>(q, q_stride, n_tokens, fp8_table, k_blocks, v_blocks, block_size, scales_offset, n_pos,
                      n_head_kv, group, head_dim, scale, head_begin, head_end, keys_ahead, values_ahead, scratch, out,
                      out_stride);
}

// attend_call for the KV type kv_type names (tessera::KvType as an int).
template <typename L>
void attend_any_type(const float* q, int64_t q_stride, int64_t n_tokens, int kv_type, const float* fp8_table,
                     const uint8_t* const* k_blocks, const uint8_t* const* v_blocks, int64_t block_size,
                     int64_t scales_offset, int64_t n_pos, int64_t n_head, int64_t n_head_kv, int64_t head_dim,
                     float scale, int64_t head_begin, int64_t head_end, float* scratch, float* out,
                     int64_t out_stride, int64_t packed_kv_heads) {
  switch (kv_type) {
#define TESSERA_ATTEND_CASE(T)                                                                                 \
  case T:                                                                                                      \
    return attend_call<L, T>(q, q_stride, n_tokens, fp8_table, k_blocks, v_blocks, block_size, scales_offset,  \
                             n_pos, n_head, n_head_kv, head_dim, scale, head_begin, head_end, scratch, out,    \
                             out_stride, packed_kv_heads);
    TESSERA_ATTEND_CASE(kF32)
    TESSERA_ATTEND_CASE(kF16)
    TESSERA_ATTEND_CASE(kBF16)
    TESSERA_ATTEND_CASE(kI8)
    TESSERA_ATTEND_CASE(kFP8)
#undef TESSERA_ATTEND_CASE
  }
}

}  // namespace
}  // namespace tessera::kernels
