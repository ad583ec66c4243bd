// AVX-512 attention over block tables for every KV storage type: attention_lanes_inl.h's kernel (query rows in
// the vector lanes; its header gives the design and each element's definition) at 16 lanes, and one token's
// calls over several kv heads in passes that share a register between kv heads (attend_one_token_packed below).
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
#include <vector>

#include "kernels/attention_lanes_inl.h"
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

// attention_lanes_inl.h's width: 16 fp32 lanes in 32 registers.
struct Zmm {
  using V = __m512;
  static constexpr int kLanes = 16;
  // Score tiles of RV row registers by P positions: RV·P accumulators, RV query registers and a broadcast.
  static constexpr int kMaxScoreRegisters = 4;
  static constexpr int score_tile_positions(int rv) { return rv == 4 ? 6 : rv == 3 ? 8 : rv == 2 ? 12 : 16; }
  // Value tiles of RO rows by NV column registers: RO·NV accumulators, RO weights and a value register.
  static constexpr int kMaxValueRegisters = 8;
  static constexpr int value_tile_rows(int nv) {
    return nv == 1 ? 12 : nv == 2 ? 9 : nv == 3 ? 7 : nv == 4 ? 6 : nv <= 6 ? 4 : 3;
  }

  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V x) { _mm512_storeu_ps(p, x); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V exp(V x) { return exp_zmm(x); }

  // The lanes whose token sees position p (p < the lane's limit).
  struct Limits {
    __m512i lim;
    explicit Limits(const int32_t* limit) : lim(_mm512_load_si512(limit)) {}
    __mmask16 seen(int64_t p) const {
      return _mm512_cmplt_epi32_mask(_mm512_set1_epi32(static_cast<int32_t>(p)), lim);
    }
  };
  static V max_where(__mmask16 lanes, V mx, V x) { return _mm512_mask_max_ps(mx, lanes, mx, x); }
  static V zero_unless(__mmask16 lanes, V x) { return _mm512_maskz_mov_ps(lanes, x); }

  // A stored row of dim elements, times its head scale s, as fp32 into d[0, stride) (zero past dim).
  template <int T>
  static void widen_row(const uint8_t* row, int64_t dim, int64_t stride, float s, const float* table, float* d) {
    const __m512 scale = _mm512_set1_ps(s);
    for (int64_t i = 0; i < stride; i += 16) {
      const __m512 x = load16<T>(row, i, first_lanes(dim - i), table);
      _mm512_storeu_ps(d + i, (T == kI8 || T == kFP8) ? _mm512_mul_ps(x, scale) : x);
    }
  }
};

constexpr int64_t kChunk = kAttentionChunk;
template <int T>
using HeadRows = tessera::kernels::HeadRows<Zmm, T>;
using WidenedRows = tessera::kernels::WidenedRows<Zmm>;

// Where attend_one_token_packed's value tiles read F16 V rows: where the cache holds them, one address per
// position, `dim` elements each (lanes past them zero, as a widened row's padding): the same fp32 values without
// the copy into a widened chunk, which had taken a fifth of a one-token call's time over 2048 positions in cache
// (kernels_bench BM_Attention/2048/1 291-309 us against 314-421, and 0.98-0.99x a TinyLlama decode step after
// 512-2000 positions, Zen 4).
struct F16Rows {
  const uint8_t* const* rows;
  int64_t dim;
  __m512 load(int64_t p, int64_t col) const { return load16<kF16>(rows[p], col, first_lanes(dim - col), nullptr); }
};

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
          value_rows_all_columns<Zmm, G>(w, 16, pass.m[j], n, F16Rows{rows, head_dim}, stride, acc, G * stride,
                                         p0 == 0);
        } else {
          pass.values[j]->load(p0, n, stride, chunk);
          value_rows_all_columns<Zmm, G>(w, 16, pass.m[j], n, WidenedRows{chunk, stride}, stride, acc, G * stride,
                                         p0 == 0);
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
  const int64_t group = n_head / n_head_kv, last_n_pos = n_pos + n_tokens - 1;
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
  attend_groups<Zmm, T>(q, q_stride, n_tokens, fp8_table, k_blocks, v_blocks, block_size, scales_offset, n_pos,
                        n_head_kv, group, head_dim, scale, head_begin, head_end, keys_ahead, values_ahead, scratch,
                        out, out_stride);
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
