// AVX-512 attention over block tables for every KV storage type: attention_lanes_inl.h's kernel (query rows in
// the vector lanes; its header gives the design and each element's definition) at 16 lanes, and one token's
// calls over several kv heads in passes that share a register between kv heads (attend_one_token_packed below).
#include <immintrin.h>

// GCC 12's 512-bit intrinsics pass _mm512_undefined_*() (a self-initialized variable) as the unused merge
// source of their unmasked forms, and -W(maybe-)uninitialized reports every inlined use of them.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstdint>
#include <cstring>

#include "kernels/attention_lanes_inl.h"
#include "kernels/ops_kernels.h"

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
  // One-token passes read F16 V rows where the cache holds them (F16Rows).
  static constexpr bool kValueRowsInPlace = true;

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

  // Elements [i, i + 16) of a stored row of dim elements as fp32 (without the head scale), zero past dim.
  template <int T>
  static V load_row(const uint8_t* row, int64_t i, int64_t dim, const float* table) {
    return load16<T>(row, i, first_lanes(dim - i), table);
  }

  // G registers (G kv heads' elements [i, i + 16)) stored element by element interleaved: at[G·l + h] = x[h][l].
  // Lane pairs, then (G = 4) 64-bit pairs: a0 b0 a1 b1 … and then a0 b0 c0 d0 a1 b1 c1 d1 ….
  template <int G>
  static void store_interleaved(const V (&x)[G], float* at) {
    if constexpr (G == 1) {
      _mm512_storeu_ps(at, x[0]);
    } else {
      const __m512i pair_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      const __m512i pair_hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
      const __m512 ab_lo = _mm512_permutex2var_ps(x[0], pair_lo, x[1]);
      const __m512 ab_hi = _mm512_permutex2var_ps(x[0], pair_hi, x[1]);
      if constexpr (G == 2) {
        _mm512_storeu_ps(at, ab_lo);
        _mm512_storeu_ps(at + 16, ab_hi);
      } else {
        static_assert(G == 4);
        const __m512i quad_lo = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
        const __m512i quad_hi = _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
        const __m512 cd_lo = _mm512_permutex2var_ps(x[2], pair_lo, x[3]);
        const __m512 cd_hi = _mm512_permutex2var_ps(x[2], pair_hi, x[3]);
        _mm512_storeu_ps(at, _mm512_permutex2var_ps(ab_lo, quad_lo, cd_lo));
        _mm512_storeu_ps(at + 16, _mm512_permutex2var_ps(ab_lo, quad_hi, cd_lo));
        _mm512_storeu_ps(at + 32, _mm512_permutex2var_ps(ab_hi, quad_lo, cd_hi));
        _mm512_storeu_ps(at + 48, _mm512_permutex2var_ps(ab_hi, quad_hi, cd_hi));
      }
    }
  }

  // The G floats at e repeated over the register (vbroadcastss, vpbroadcastq, vbroadcasti32x4).
  template <int G>
  static V broadcast_group(const float* e) {
    if constexpr (G == 1) {
      return _mm512_set1_ps(*e);
    } else if constexpr (G == 2) {
      int64_t pair;
      std::memcpy(&pair, e, sizeof(pair));
      return _mm512_castsi512_ps(_mm512_set1_epi64(pair));
    } else {
      static_assert(G == 4);
      return _mm512_castsi512_ps(_mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e))));
    }
  }
};

}  // namespace

void attend(const float* q, int64_t q_stride, int64_t n_tokens, int kv_type, const float* fp8_table,
            const uint8_t* const* k_blocks, const uint8_t* const* v_blocks, int64_t block_size, int64_t scales_offset,
            int64_t n_pos, int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, int64_t head_begin,
            int64_t head_end, float* scratch, float* out, int64_t out_stride, int64_t packed_kv_heads) {
  attend_any_type<Zmm>(q, q_stride, n_tokens, kv_type, fp8_table, k_blocks, v_blocks, block_size, scales_offset, n_pos,
                       n_head, n_head_kv, head_dim, scale, head_begin, head_end, scratch, out, out_stride,
                       packed_kv_heads);
}

}  // namespace tessera::kernels::avx512
