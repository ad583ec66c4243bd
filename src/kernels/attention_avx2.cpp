// AVX2 attention over block tables for every KV storage type. The query heads that share a kv head, for every
// token of the call, are done together: each chunk of K or V rows is widened to fp32 once for all of them.
// Scores are vector dot products (the per-head scale applied once per score), then the vector softmax, then FMA
// accumulation of the values.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

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

// Lane i of the result is the sum of the eight lanes of acc[i]. Each sum is the same fixed tree whatever the
// other accumulators hold, so a score never depends on its neighbours in the chunk.
inline __m256 sum_lanes8(const __m256 acc[8]) {
  const __m256 t0 = _mm256_hadd_ps(acc[0], acc[1]), t1 = _mm256_hadd_ps(acc[2], acc[3]);
  const __m256 t2 = _mm256_hadd_ps(acc[4], acc[5]), t3 = _mm256_hadd_ps(acc[6], acc[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Positions are taken eight at a time: their K (then V) rows of one kv head are widened to fp32 once and serve
// every query row of the call (each token × each query head of the group), and eight scores share one
// horizontal reduction.
constexpr int kChunk = 8;

template <int T>
struct HeadRows : KvHeadSlice {

  // Rows of positions [p0, p0 + n) as fp32 into dst[kChunk][stride] (zero past n and past head_dim), and their
  // per-head scales into scales[kChunk] (1 for unscaled types, 0 past n).
  // The block and slot advance with the position: one 64-bit division per chunk, not one per row, which a
  // decode step's few query rows do not amortize.
  void load(int64_t p0, int64_t n, int64_t stride, float* dst, float* scales) const {
    const int64_t n_vec = head_dim / 8 * 8;
    int64_t block_index = p0 / block_size, slot = p0 % block_size;
    std::optional<RowsAhead> walk;
    if (ahead != nullptr) walk = ahead->from(p0);
    for (int64_t j = 0; j < kChunk; ++j, slot = slot + 1 == block_size ? (++block_index, 0) : slot + 1) {
      float* d = dst + j * stride;
      if (j >= n) {
        std::memset(d, 0, size_t(stride) * sizeof(float));
        scales[j] = 0.0f;
        continue;
      }
      if (walk) walk->request_next();
      const uint8_t* block = blocks[block_index];
      const uint8_t* row = block + slot * row_bytes + head_offset;
      for (int64_t i = 0; i < n_vec; i += 8) _mm256_storeu_ps(d + i, load8<T>(row, i, fp8_table));
      for (int64_t i = n_vec; i < stride; ++i) d[i] = i < head_dim ? load1<T>(row, i, fp8_table) : 0.0f;
      scales[j] = 1.0f;
      if constexpr (T == kI8 || T == kFP8) std::memcpy(&scales[j], block + scales_offset + (slot * n_head_kv + g) * 4, 4);
    }
  }
};

// For R query rows at once: acc_r[0..NV) += Σ_j w[r][j] · rows[j][0..8·NV), j in position order. Each value row
// loaded serves the R query rows (one load per R FMAs instead of one per FMA, which bound the one-row loop); every
// output element still runs the same FMA chain, so the result does not depend on R.
template <int R, int NV>
inline void accumulate_values(const float (*w)[kChunk], int64_t n, const float* rows, int64_t stride, bool first,
                              float* const* acc_mem) {
  __m256 acc[R][NV];
  static_for<R>([&](auto r) {
    static_for<NV>([&](auto v) { acc[r][v] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc_mem[r] + 8 * v); });
  });
  for (int64_t j = 0; j < n; ++j) {
    __m256 wj[R];
    static_for<R>([&](auto r) { wj[r] = _mm256_set1_ps(w[r][j]); });
    static_for<NV>([&](auto v) {
      __m256 vj = _mm256_loadu_ps(rows + j * stride + 8 * v);
      keep_in_register(vj);  // one load for the R rows, not one per FMA
      static_for<R>([&](auto r) { acc[r][v] = _mm256_fmadd_ps(wj[r], vj, acc[r][v]); });
    });
  }
  static_for<R>([&](auto r) { static_for<NV>([&](auto v) { _mm256_storeu_ps(acc_mem[r] + 8 * v, acc[r][v]); }); });
}

// The R rows' outputs over the whole (padded) head_dim, NV_MAX vectors at a time: R · NV_MAX accumulators, R
// weights and a value vector stay within the 16 registers.
template <int R, int NV_MAX>
void accumulate_value_rows(const float (*w)[kChunk], int64_t n, const float* rows, int64_t stride, bool first,
                           float* const* acc_rows) {
  for (int64_t i0 = 0; i0 < stride; i0 += 8 * NV_MAX) {
    float* acc[R];
    for (int r = 0; r < R; ++r) acc[r] = acc_rows[r] + i0;
    const int64_t nv = std::min<int64_t>(NV_MAX, (stride - i0) / 8);
    static_for<NV_MAX>([&](auto k) {
      if (nv == k + 1) accumulate_values<R, k + 1>(w, n, rows + i0, stride, first, acc);
    });
  }
}

// Query rows whose value sums are accumulated together.
constexpr int kValueRows = 3;

// Scores of query rows r0 and r0 + 1 (q0, q1) against the chunk's 8 key rows, in two halves of 4 positions: the
// 8 accumulators of a half are both rows' (every key vector loaded once for the two rows) and one sum_lanes8
// reduces them. Each score is the same FMA chain and reduction tree as in score_row.
inline void score_row_pair(const float* q0, const float* q1, const float* rows, int64_t stride, __m256 key_scales,
                           float* out0, float* out1) {
  static_for<2>([&](auto half) {
    __m256 acc[8];
    static_for<8>([&](auto j) { acc[j] = _mm256_setzero_ps(); });
    const float* k = rows + 4 * half * stride;
    for (int64_t i = 0; i < stride; i += 8) {
      const __m256 a = _mm256_loadu_ps(q0 + i), b = _mm256_loadu_ps(q1 + i);
      static_for<4>([&](auto j) {
        __m256 kj = _mm256_loadu_ps(k + j * stride + i);
        keep_in_register(kj);  // one load for both rows, not one per FMA
        acc[j] = _mm256_fmadd_ps(a, kj, acc[j]);
        acc[4 + j] = _mm256_fmadd_ps(b, kj, acc[4 + j]);
      });
    }
    // The half's 4 key scales, for both rows' lanes.
    const __m256 scales = half == 0 ? _mm256_permute2f128_ps(key_scales, key_scales, 0x00)
                                    : _mm256_permute2f128_ps(key_scales, key_scales, 0x11);
    const __m256 s = _mm256_mul_ps(sum_lanes8(acc), scales);
    _mm_storeu_ps(out0 + 4 * half, _mm256_castps256_ps128(s));
    _mm_storeu_ps(out1 + 4 * half, _mm256_extractf128_ps(s, 1));
  });
}

// Scores of one query row against the chunk's 8 key rows: dot(q, k) · k's head scale · 1/√d.
inline void score_row(const float* q, const float* rows, int64_t stride, __m256 key_scales, float* out) {
  __m256 acc[kChunk];
  static_for<kChunk>([&](auto j) { acc[j] = _mm256_setzero_ps(); });
  for (int64_t i = 0; i < stride; i += 8) {
    const __m256 qv = _mm256_loadu_ps(q + i);
    static_for<kChunk>([&](auto j) { acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(rows + j * stride + i), acc[j]); });
  }
  _mm256_storeu_ps(out, _mm256_mul_ps(sum_lanes8(acc), key_scales));
}

template <int T>
void attend_typed(const float* q, int64_t q_stride, int64_t n_tokens, const float* fp8_table,
                  const uint8_t* const* k_blocks, const uint8_t* const* v_blocks, int64_t block_size,
                  int64_t scales_offset, int64_t n_pos, int64_t n_head, int64_t n_head_kv, int64_t head_dim,
                  float scale, int64_t head_begin, int64_t head_end, float* scratch, float* out, int64_t out_stride) {
  const int64_t group = n_head / n_head_kv;
  const int64_t stride = (head_dim + 7) / 8 * 8;  // fp32 row stride, zero padded
  const int64_t last_n_pos = n_pos + n_tokens - 1;  // token i attends n_pos + i positions
  const int64_t n_pos_pad = (last_n_pos + kChunk - 1) / kChunk * kChunk;
  // Scratch layout (attend_scratch_floats), one query row per (token, head of the group): scores
  // [rows][n_pos_pad], K/V chunk [kChunk][stride], queries [rows][stride], outputs [rows][stride].
  const int64_t max_rows = n_tokens * group;
  float* scores = scratch;
  float* rows = scores + max_rows * n_pos_pad;
  float* queries = rows + kChunk * stride;
  float* outputs = queries + max_rows * stride;
  float chunk_scales[kChunk];
  const RowsAhead keys_ahead(k_blocks, block_size, last_n_pos, n_head_kv, head_dim * element_bytes<T>(), head_begin,
                             head_end, group, request_scheme(n_tokens));
  const RowsAhead values_ahead(v_blocks, block_size, last_n_pos, n_head_kv, head_dim * element_bytes<T>(), head_begin,
                               head_end, group, request_scheme(n_tokens));

  for (int64_t g = head_begin / group; g * group < head_end; ++g) {
    const int64_t h0 = std::max(head_begin, g * group), h1 = std::min(head_end, (g + 1) * group);
    const int64_t m = h1 - h0;  // row r = token (r / m), head h0 + r % m
    const RowsAhead group_keys_ahead = keys_ahead.from_head(h0), group_values_ahead = values_ahead.from_head(h0);
    const HeadRows<T> keys{kv_head_slice<T>(k_blocks, block_size, scales_offset, n_head_kv, head_dim, g, fp8_table,
                                            &group_keys_ahead)};
    const HeadRows<T> values{kv_head_slice<T>(v_blocks, block_size, scales_offset, n_head_kv, head_dim, g, fp8_table,
                                              &group_values_ahead)};
    for (int64_t r = 0; r < n_tokens * m; ++r) {
      float* qd = queries + r * stride;
      std::memcpy(qd, q + (r / m) * q_stride + (h0 + r % m) * head_dim, size_t(head_dim) * sizeof(float));
      std::fill(qd + head_dim, qd + stride, 0.0f);
    }
    // The first row whose token sees position p0: tokens before it end earlier (their scores and weights past
    // their own n_pos are never read).
    const auto first_row = [&](int64_t p0) { return std::max<int64_t>(0, p0 - n_pos + 1) * m; };

    const int64_t n_rows = n_tokens * m;
    // Scores: dot(q, k) · k's head scale · 1/√d, two query rows at a time.
    for (int64_t p0 = 0; p0 < last_n_pos; p0 += kChunk) {
      keys.load(p0, std::min<int64_t>(kChunk, last_n_pos - p0), stride, rows, chunk_scales);
      const __m256 key_scales = _mm256_mul_ps(_mm256_loadu_ps(chunk_scales), _mm256_set1_ps(scale));
      int64_t r = first_row(p0);
      for (; r + 2 <= n_rows; r += 2) {
        score_row_pair(queries + r * stride, queries + (r + 1) * stride, rows, stride, key_scales,
                       scores + r * n_pos_pad + p0, scores + (r + 1) * n_pos_pad + p0);
      }
      if (r < n_rows) score_row(queries + r * stride, rows, stride, key_scales, scores + r * n_pos_pad + p0);
    }
    for (int64_t r = 0; r < n_rows; ++r) softmax(scores + r * n_pos_pad, n_pos + r / m);

    // Outputs: Σ_p weight_p · v_p, accumulated in position order, up to kValueRows rows at a time (rows that
    // take the same number of the chunk's positions).
    // Token i sees n_pos + i positions, so a chunk that ends by n_pos is whole for every row.
    const auto positions_in_chunk = [&](int64_t r, int64_t p0) {
      return p0 + kChunk <= n_pos ? kChunk : std::min<int64_t>(kChunk, n_pos + r / m - p0);
    };
    for (int64_t p0 = 0; p0 < last_n_pos; p0 += kChunk) {
      values.load(p0, std::min<int64_t>(kChunk, last_n_pos - p0), stride, rows, chunk_scales);
      for (int64_t r = first_row(p0); r < n_rows;) {
        const int64_t n = positions_in_chunk(r, p0);
        int n_together = 1;
        while (n_together < kValueRows && r + n_together < n_rows && positions_in_chunk(r + n_together, p0) == n) {
          ++n_together;
        }
        float w[kValueRows][kChunk];
        float* acc[kValueRows];
        for (int k = 0; k < n_together; ++k) {
          const float* row_scores = scores + (r + k) * n_pos_pad + p0;
          if (n == kChunk) {
            _mm256_storeu_ps(w[k], _mm256_mul_ps(_mm256_loadu_ps(row_scores), _mm256_loadu_ps(chunk_scales)));
          } else {
            for (int64_t j = 0; j < n; ++j) w[k][j] = row_scores[j] * chunk_scales[j];
          }
          acc[k] = outputs + (r + k) * stride;
        }
        switch (n_together) {
          case 1: accumulate_value_rows<1, 8>(w, n, rows, stride, p0 == 0, acc); break;
          case 2: accumulate_value_rows<2, 6>(w, n, rows, stride, p0 == 0, acc); break;
          default: accumulate_value_rows<3, 4>(w, n, rows, stride, p0 == 0, acc); break;
        }
        r += n_together;
      }
    }
    for (int64_t r = 0; r < n_tokens * m; ++r) {
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
