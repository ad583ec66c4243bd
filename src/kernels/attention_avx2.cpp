// AVX2 attention over block tables for every KV storage type: attention_lanes_inl.h's kernel (query rows in the
// vector lanes) at 8 lanes. One token's call over several kv heads runs that header's one-token passes with
// half the kv heads a 16-lane register packs: 2 kv heads a register for groups of up to 4 query heads, 1 for
// groups of 5 to 8.
//
// It replaced vector dot products with a horizontal reduction per 8 scores (two query rows a key load): on Zen 4
// at the AVX2 level, kernels_bench (one thread, 6 ABBA rounds) BM_Attention/512/8 0.81x the time,
// BM_Attention/2048/1 0.89x, /256/1 0.87x; a TinyLlama Q4_0 decode step after 2000 positions 0.957x (600
// alternated rounds, slower minutes), level after 32.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/attention_lanes_inl.h"
#include "kernels/ops_kernels.h"

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

// attention_lanes_inl.h's width: 8 fp32 lanes in 16 registers.
struct Ymm {
  using V = __m256;
  static constexpr int kLanes = 8;
  // Score tiles of RV row registers by P positions: RV·P accumulators, RV query registers and a broadcast.
  static constexpr int kMaxScoreRegisters = 3;
  static constexpr int score_tile_positions(int rv) { return rv == 3 ? 4 : rv == 2 ? 6 : 12; }
  // Value tiles of RO rows by NV column registers: RO·NV accumulators, RO weights and a value register.
  static constexpr int kMaxValueRegisters = 4;
  static constexpr int value_tile_rows(int nv) { return nv == 1 ? 7 : nv == 2 ? 5 : 3; }
  // One-token passes widen F16 V rows into a chunk, as other types', rather than read them in place (F16Rows):
  // a row then takes one F16C conversion, not one per value tile. kernels_bench, one thread, 5 ABBA rounds,
  // reading in place against widened: BM_AttentionDecodeCold/2048/1/0 1.136x the time against 1.000x of the
  // group-by-group path, BM_Attention/2048/1 0.98x against 0.79x.
  static constexpr bool kValueRowsInPlace = false;

  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V x) { _mm256_storeu_ps(p, x); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V exp(V x) { return exp_ps(x); }

  // The lanes whose token sees position p (p < the lane's limit), as an all-ones or zero float lane.
  struct Limits {
    __m256i lim;
    explicit Limits(const int32_t* limit) : lim(_mm256_load_si256(reinterpret_cast<const __m256i*>(limit))) {}
    __m256 seen(int64_t p) const {
      return _mm256_castsi256_ps(_mm256_cmpgt_epi32(lim, _mm256_set1_epi32(static_cast<int32_t>(p))));
    }
  };
  static V max_where(__m256 lanes, V mx, V x) { return _mm256_blendv_ps(mx, _mm256_max_ps(mx, x), lanes); }
  static V zero_unless(__m256 lanes, V x) { return _mm256_and_ps(lanes, x); }

  // Elements [i, i + 8) of a stored row of dim elements as fp32 (without the head scale), zero past dim.
  template <int T>
  static V load_row(const uint8_t* row, int64_t i, int64_t dim, const float* table) {
    if (dim - i >= 8) return load8<T>(row, i, table);
    alignas(32) float tail[8] = {};
    for (int64_t l = 0; l < dim - i; ++l) tail[l] = load1<T>(row, i + l, table);
    return _mm256_load_ps(tail);
  }

  // G registers (G kv heads' elements [i, i + 8)) stored element by element interleaved: at[G·l + h] = x[h][l].
  template <int G>
  static void store_interleaved(const V (&x)[G], float* at) {
    if constexpr (G == 1) {
      _mm256_storeu_ps(at, x[0]);
    } else {
      static_assert(G == 2);
      // a0 b0 a1 b1 | a4 b4 a5 b5 and a2 b2 a3 b3 | a6 b6 a7 b7, then their halves in order.
      const __m256 lo = _mm256_unpacklo_ps(x[0], x[1]), hi = _mm256_unpackhi_ps(x[0], x[1]);
      _mm256_storeu_ps(at, _mm256_permute2f128_ps(lo, hi, 0x20));
      _mm256_storeu_ps(at + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
  }

  // The G floats at e repeated over the register (vbroadcastss, vbroadcastsd).
  template <int G>
  static V broadcast_group(const float* e) {
    if constexpr (G == 1) {
      return _mm256_broadcast_ss(e);
    } else {
      static_assert(G == 2);
      return _mm256_castpd_ps(_mm256_broadcast_sd(reinterpret_cast<const double*>(e)));
    }
  }
};

}  // namespace

void attend(const float* q, int64_t q_stride, int64_t n_tokens, int kv_type, const float* fp8_table,
            const uint8_t* const* k_blocks, const uint8_t* const* v_blocks, int64_t block_size, int64_t scales_offset,
            int64_t n_pos, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, int64_t head_begin,
            int64_t head_end, float* scratch, float* out, int64_t out_stride, int64_t packed_kv_heads) {
  attend_any_type<Ymm>(q, q_stride, n_tokens, kv_type, fp8_table, k_blocks, v_blocks, block_size, scales_offset, n_pos,
                       n_head, n_head_kv, head_dim, scale, head_begin, head_end, scratch, out, out_stride,
                       packed_kv_heads);
}

}  // namespace tessera::kernels::avx2
