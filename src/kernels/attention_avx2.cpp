// AVX2 attention over block tables for every KV storage type, with the query rows in the vector lanes: the
// design of attention_avx512.cpp at 8 lanes (that file's header explains it; the functions here keep its names
// and definitions). A call's query rows (each token × each query head of one kv-head group) are transposed into
// Qt[d][row], 8 rows to a register; score tiles of RV registers × P positions broadcast key elements against
// them, the softmax runs down the positions 8 rows at a time, and the value tiles broadcast one weight per row
// against the value row's registers. Each element is one FMA chain (scores in dimension order, value sums in
// position order), so a token gives the same bits alone or inside any prompt run, in any split of heads.
// Without AVX-512 there is no packing of several kv heads into a register (attention_avx512.cpp's one-token
// passes): a group of up to 8 query heads fills its register's lanes, or some of them.
//
// It replaced vector dot products with a horizontal reduction per 8 scores (two query rows a key load): on Zen 4
// at the AVX2 level, kernels_bench (one thread, 6 ABBA rounds) BM_Attention/512/8 0.81x the time,
// BM_Attention/2048/1 0.89x, /256/1 0.87x; a TinyLlama Q4_0 decode step after 2000 positions 0.957x (600
// alternated rounds, slower minutes), level after 32.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

#include "kernels/attention_rows_ahead_inl.h"
#include "kernels/ops_kernels.h"
#include "kernels/static_for.h"

namespace tessera::kernels::avx2 {
namespace {
#include "kernels/simd_math_avx2_inl.h"

// Eight elements starting at row[i], as fp32 (without the per-head scale).
template <int T>
inline __m256 load8(const uint8_t* row, int64_t i, const float* fp8_table) {
  if constexpr (T == kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (T == kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  } else if constexpr (T == kBF16) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  } else if constexpr (T == kI8) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + i))));
  } else {
    const __m256i codes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + i)));
    return _mm256_i32gather_ps(fp8_table, codes, 4);
  }
}

// One element (for head_dim tails that are not a multiple of 8).
template <int T>
inline float load1(const uint8_t* row, int64_t i, const float* fp8_table) {
  if constexpr (T == kF32) {
    float f;
    std::memcpy(&f, row + 4 * i, 4);
    return f;
  } else if constexpr (T == kF16) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    return _cvtsh_ss(h);
  } else if constexpr (T == kBF16) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    const uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  } else if constexpr (T == kI8) {
    return float(int8_t(row[i]));
  } else {
    return fp8_table[row[i]];
  }
}

// Positions per K or V chunk widened to fp32 at once; a multiple of every score tile's P (4, 6, 12).
constexpr int64_t kChunk = 48;

template <int T>
struct HeadRows : KvHeadSlice {
  // Rows of positions [p0, p0 + n), times their head scale, as fp32 into dst[j][stride] (zero past head_dim);
  // rows [n, kChunk) are zeroed. The block and slot advance with the position (one division per call), and the
  // fields are read into locals once: the stores to dst may alias them as far as the compiler knows.
  void load(int64_t p0, int64_t n, int64_t stride, float* dst) const {
    const int64_t dim = head_dim, n_vec = dim / 8 * 8, size = block_size;
    const float* const table = fp8_table;
    int64_t block_index = p0 / size, slot = p0 % size;
    std::optional<RowsAhead> walk;
    if (ahead != nullptr) walk = ahead->from(p0);
    for (int64_t j = 0; j < n; ++j, slot = slot + 1 == size ? (++block_index, 0) : slot + 1) {
      if (walk) walk->request_next();
      float* d = dst + j * stride;
      const uint8_t* block = blocks[block_index];
      const uint8_t* row = block + slot * row_bytes + head_offset;
      float s = 1.0f;
      if constexpr (T == kI8 || T == kFP8) std::memcpy(&s, block + scales_offset + (slot * n_head_kv + g) * 4, 4);
      const __m256 scale = _mm256_set1_ps(s);
      for (int64_t i = 0; i < n_vec; i += 8) {
        const __m256 x = load8<T>(row, i, table);
        _mm256_storeu_ps(d + i, (T == kI8 || T == kFP8) ? _mm256_mul_ps(x, scale) : x);
      }
      for (int64_t i = n_vec; i < stride; ++i) {
        d[i] = i >= dim ? 0.0f : (T == kI8 || T == kFP8) ? load1<T>(row, i, table) * s : load1<T>(row, i, table);
      }
    }
    std::memset(dst + n * stride, 0, size_t((kChunk - n) * stride) * sizeof(float));
  }
};

// The key rows' stride (floats) as a compile-time constant for the common head sizes (attention_avx512.cpp's
// with_key_stride says why).
template <typename Fn>
void with_key_stride(int64_t stride, Fn&& fn) {
  switch (stride) {
    case 64: return fn(std::integral_constant<int64_t, 64>{});
    case 128: return fn(std::integral_constant<int64_t, 128>{});
    default: return fn(std::integral_constant<int64_t, 0>{});
  }
}

// Scores of RV registers of query rows (from qt, rows8 floats per dimension) against P key rows (k, k_stride
// floats apart, KS when known) into s[p · rows8 + 8 · rv]; the first `seen` positions (those every row sees) also
// raise the rows' running maxima mx[8 · rv + lane].
template <int RV, int P, int64_t KS>
__attribute__((noinline)) void score_tile(const float* qt, int64_t rows8, int64_t head_dim, const float* k,
                                          int64_t k_stride, __m256 scale, int64_t seen, float* s, float* mx) {
  const int64_t stride = KS > 0 ? KS : k_stride;
  __m256 acc[RV][P];
  static_for<RV>([&](auto v) { static_for<P>([&](auto p) { acc[v][p] = _mm256_setzero_ps(); }); });
  for (int64_t d = 0; d < head_dim; ++d) {
    __m256 q[RV];
    static_for<RV>([&](auto v) { q[v] = _mm256_loadu_ps(qt + d * rows8 + 8 * v); });
    static_for<P>([&](auto p) {
      const __m256 kp = _mm256_broadcast_ss(k + p * stride + d);
      static_for<RV>([&](auto v) { acc[v][p] = _mm256_fmadd_ps(q[v], kp, acc[v][p]); });
    });
  }
  static_for<RV>([&](auto v) {
    __m256 top = _mm256_loadu_ps(mx + 8 * v);
    static_for<P>([&](auto p) {
      const __m256 score = _mm256_mul_ps(acc[v][p], scale);
      _mm256_storeu_ps(s + p * rows8 + 8 * v, score);
      if (p < seen) top = _mm256_max_ps(top, score);
    });
    _mm256_storeu_ps(mx + 8 * v, top);
  });
}

// Positions per score tile for RV row registers: RV·P accumulators, RV query registers and a broadcast within
// the 16 registers.
constexpr int score_tile_positions(int rv) { return rv == 3 ? 4 : rv == 2 ? 6 : 12; }
constexpr int kMaxScoreRegisters = 3;

// A chunk's scores for row registers [rv0, rv0 + RV), over the tiles that hold its first n positions; its first
// `seen` positions are seen by every row: they raise the maxima mx.
template <int RV>
void score_chunk(const float* qt, int64_t rows8, int64_t head_dim, const float* k, int64_t stride, float scale,
                 int64_t n, int64_t seen, float* s, float* mx) {
  constexpr int P = score_tile_positions(RV);
  static_assert(kChunk % P == 0);
  with_key_stride(stride, [&](auto known) {
    for (int64_t p = 0; p < n; p += P) {
      score_tile<RV, P, known>(qt, rows8, head_dim, k + p * stride, stride, _mm256_set1_ps(scale),
                               std::clamp<int64_t>(seen - p, 0, P), s + p * rows8, mx);
    }
  });
}

// Value sums of RO rows (weights w[p · rows8 + ro]) over positions [0, n) of a chunk (fp32 rows v, v_stride
// floats apart), columns [0, 8·NV) from v, into acc_mem's rows (acc_stride apart); `first` starts from zero.
template <int RO, int NV>
__attribute__((noinline)) void value_tile(const float* w, int64_t rows8, int64_t n, const float* v, int64_t v_stride,
                                          float* acc_mem, int64_t acc_stride, bool first) {
  __m256 acc[RO][NV];
  static_for<RO>([&](auto r) {
    static_for<NV>([&](auto c) {
      acc[r][c] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc_mem + r * acc_stride + 8 * c);
    });
  });
  for (int64_t p = 0; p < n; ++p) {
    __m256 wp[RO];
    static_for<RO>([&](auto r) { wp[r] = _mm256_broadcast_ss(w + p * rows8 + r); });
    static_for<NV>([&](auto c) {
      const __m256 vc = _mm256_loadu_ps(v + p * v_stride + 8 * c);
      static_for<RO>([&](auto r) { acc[r][c] = _mm256_fmadd_ps(wp[r], vc, acc[r][c]); });
    });
  }
  static_for<RO>([&](auto r) {
    static_for<NV>([&](auto c) { _mm256_storeu_ps(acc_mem + r * acc_stride + 8 * c, acc[r][c]); });
  });
}

// Rows per value tile for NV column registers: RO·NV accumulators, RO weights and a value register.
constexpr int value_tile_rows(int nv) { return nv == 1 ? 7 : nv == 2 ? 5 : 3; }
constexpr int kMaxValueRegisters = 4;

// Value sums of rows [0, n_rows) over a chunk's positions [0, n), every column of the rows (stride floats, in steps
// of up to kMaxValueRegisters registers).
void value_rows_all_columns(const float* w, int64_t rows8, int64_t n_rows, int64_t n, const float* v, int64_t stride,
                            float* acc_mem, int64_t acc_stride, bool first) {
  for (int64_t col = 0; col < stride; col += 8 * kMaxValueRegisters) {
    const int64_t nv = std::min<int64_t>(kMaxValueRegisters, (stride - col) / 8);
    static_for<kMaxValueRegisters>([&](auto i) {
      if (nv != i + 1) return;
      constexpr int NV = i + 1, RO = value_tile_rows(NV);
      for_each_tile<RO>(0, n_rows, [&](auto rows, int64_t r) {
        value_tile<decltype(rows)::value, NV>(w + r, rows8, n, v + col, stride, acc_mem + r * acc_stride + col,
                                              acc_stride, first);
      });
    });
  }
}

template <int T>
void attend_typed(const float* q, int64_t q_stride, int64_t n_tokens, const float* fp8_table,
                  const uint8_t* const* k_blocks, const uint8_t* const* v_blocks, int64_t block_size,
                  int64_t scales_offset, int64_t n_pos, int64_t n_head, int64_t n_head_kv, int64_t head_dim,
                  float scale, int64_t head_begin, int64_t head_end, float* scratch, float* out, int64_t out_stride) {
  const int64_t group = n_head / n_head_kv;
  const int64_t stride = (head_dim + 7) / 8 * 8;  // fp32 K/V and output row stride, zero padded
  const int64_t last_n_pos = n_pos + n_tokens - 1;  // token i attends n_pos + i positions
  const int64_t n_chunks = (last_n_pos + kChunk - 1) / kChunk;
  const int64_t max_rows8 = (n_tokens * group + 7) / 8 * 8;
  // Scratch layout (attend_scratch_floats): Qt [head_dim][rows8], scores [n_chunks · kChunk][rows8], a K or V
  // chunk [kChunk][stride], outputs [rows][stride], the rows' score maxima [rows8] and 1 / Σ e [rows8].
  float* qt = scratch;
  float* scores = qt + head_dim * max_rows8;
  float* chunk = scores + n_chunks * kChunk * max_rows8;
  float* outputs = chunk + kChunk * stride;
  float* row_max = outputs + n_tokens * group * stride;
  float* row_inv = row_max + max_rows8;

  const RowsAhead keys_ahead(k_blocks, block_size, last_n_pos, n_head_kv, head_dim * element_bytes<T>(), head_begin,
                             head_end, group, request_scheme(n_tokens));
  const RowsAhead values_ahead(v_blocks, block_size, last_n_pos, n_head_kv, head_dim * element_bytes<T>(), head_begin,
                               head_end, group, request_scheme(n_tokens));
  for (int64_t g = head_begin / group; g * group < head_end; ++g) {
    const int64_t h0 = std::max(head_begin, g * group), h1 = std::min(head_end, (g + 1) * group);
    const int64_t m = h1 - h0;  // row r = token (r / m), head h0 + r % m
    const int64_t n_rows = n_tokens * m, rows8 = (n_rows + 7) / 8 * 8, n_regs = rows8 / 8;
    const RowsAhead group_keys_ahead = keys_ahead.from_head(h0), group_values_ahead = values_ahead.from_head(h0);
    const HeadRows<T> keys{kv_head_slice<T>(k_blocks, block_size, scales_offset, n_head_kv, head_dim, g, fp8_table,
                                            &group_keys_ahead)};
    const HeadRows<T> values{kv_head_slice<T>(v_blocks, block_size, scales_offset, n_head_kv, head_dim, g, fp8_table,
                                              &group_values_ahead)};
    // Qt[d][row], row by row.
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t i = 0; i < m; ++i) {
        const float* src = q + t * q_stride + (h0 + i) * head_dim;
        float* dst = qt + t * m + i;
        for (int64_t d = 0; d < head_dim; ++d) dst[d * rows8] = src[d];
      }
    }
    for (int64_t d = 0; d < head_dim; ++d) std::fill(qt + d * rows8 + n_rows, qt + (d + 1) * rows8, 0.0f);

    const auto positions_in = [&](int64_t c) { return std::min(kChunk, last_n_pos - c * kChunk); };
    std::fill(row_max, row_max + rows8, -INFINITY);
    for (int64_t c = 0; c < n_chunks; ++c) {
      const int64_t p0 = c * kChunk;
      const int64_t n = positions_in(c), seen = std::clamp<int64_t>(n_pos - p0, 0, n);
      keys.load(p0, n, stride, chunk);
      float* s = scores + p0 * rows8;
      for (int64_t v0 = 0; v0 < n_regs; v0 += kMaxScoreRegisters) {
        static_for<kMaxScoreRegisters>([&](auto i) {
          if (std::min<int64_t>(kMaxScoreRegisters, n_regs - v0) == i + 1) {
            score_chunk<i + 1>(qt + 8 * v0, rows8, head_dim, chunk, stride, scale, n, seen, s + 8 * v0,
                               row_max + 8 * v0);
          }
        });
      }
    }

    // Softmax down the positions, 8 rows at a time; a lane's positions end at its token's n_pos. The maxima over
    // positions [0, n_pos), which every row sees, came with the scores.
    // The last position + 1 a register's rows see (their last row's token's n_pos).
    const auto register_end = [&](int64_t v) { return n_pos + (std::min(8 * v + 7, n_rows - 1)) / m; };
    for (int64_t v = 0; v < n_regs; ++v) {
      alignas(32) int32_t limit[8];
      for (int64_t l = 0; l < 8; ++l) {
        const int64_t r = 8 * v + l;
        limit[l] = r < n_rows ? static_cast<int32_t>(n_pos + r / m) : 0;
      }
      const __m256i lim = _mm256_load_si256(reinterpret_cast<const __m256i*>(limit));
      const auto seen_at = [&](int64_t p) {
        return _mm256_castsi256_ps(_mm256_cmpgt_epi32(lim, _mm256_set1_epi32(static_cast<int32_t>(p))));
      };
      const int64_t end = register_end(v);
      float* s = scores + 8 * v;
      __m256 mx = _mm256_loadu_ps(row_max + 8 * v);
      for (int64_t p = n_pos; p < end; ++p) {
        mx = _mm256_blendv_ps(mx, _mm256_max_ps(mx, _mm256_loadu_ps(s + p * rows8)), seen_at(p));
      }
      __m256 sum = _mm256_setzero_ps();
      for (int64_t p = 0; p < end; ++p) {
        const __m256 e = _mm256_and_ps(seen_at(p), exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + p * rows8), mx)));
        _mm256_storeu_ps(s + p * rows8, e);
        sum = _mm256_add_ps(sum, e);
      }
      _mm256_storeu_ps(row_inv + 8 * v, _mm256_div_ps(_mm256_set1_ps(1.0f), sum));
    }

    // Outputs: per chunk of values, each token's rows over the positions it sees (n_pos + token). The positions
    // of a chunk that every token sees take all rows of the call as one range; each token's rows then go on over
    // the positions only it and later tokens see. Every output element runs one FMA chain in position order.
    const auto value_sums = [&](const float* w, int64_t n_rows_in, int64_t j0, int64_t n, float* acc, bool start) {
      value_rows_all_columns(w + j0 * rows8, rows8, n_rows_in, n, chunk + j0 * stride, stride, acc, stride, start);
    };
    for (int64_t c = 0; c < n_chunks; ++c) {
      const int64_t p0 = c * kChunk;
      values.load(p0, positions_in(c), stride, chunk);
      // The chunk's weights e · (1 / Σ e), while they are in L1 for the value tiles.
      for (int64_t v = 0; v < n_regs; ++v) {
        const __m256 inv = _mm256_loadu_ps(row_inv + 8 * v);
        float* s = scores + 8 * v;
        for (int64_t p = p0, end = std::min(p0 + kChunk, register_end(v)); p < end; ++p) {
          _mm256_storeu_ps(s + p * rows8, _mm256_mul_ps(_mm256_loadu_ps(s + p * rows8), inv));
        }
      }
      const float* w = scores + p0 * rows8;
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
            int64_t head_end, float* scratch, float* out, int64_t out_stride) {
  switch (kv_type) {
#define TESSERA_ATTEND_CASE(T)                                                                                 \
  case T:                                                                                                      \
    return attend_typed<T>(q, q_stride, n_tokens, fp8_table, k_blocks, v_blocks, block_size, scales_offset,    \
                           n_pos, n_head, n_head_kv, head_dim, scale, head_begin, head_end, scratch, out,      \
                           out_stride);
    TESSERA_ATTEND_CASE(kF32)
    TESSERA_ATTEND_CASE(kF16)
    TESSERA_ATTEND_CASE(kBF16)
    TESSERA_ATTEND_CASE(kI8)
    TESSERA_ATTEND_CASE(kFP8)
#undef TESSERA_ATTEND_CASE
  }
}

}  // namespace tessera::kernels::avx2
