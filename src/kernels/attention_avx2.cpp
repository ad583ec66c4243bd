// AVX2 attention over block tables for every KV storage type: vector dot products for the scores (elements
// widened to fp32 on load, the per-head scale applied once per score), the vector softmax, and FMA
// accumulation of the values, one query head at a time.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/ops_kernels.h"

namespace tessera::kernels::avx2 {
namespace {
#include "kernels/simd_math_avx2_inl.h"

// Mirrors tessera::KvType (not included here: see ops_kernels.h).
enum Type : int { kF32 = 0, kF16 = 1, kBF16 = 2, kI8 = 3, kFP8 = 4 };

template <int T>
constexpr int64_t element_bytes() {
  return T == kF32 ? 4 : (T == kF16 || T == kBF16) ? 2 : 1;
}

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

template <int T>
inline float dot(const float* q, const uint8_t* k, int64_t n, const float* fp8_table) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8<T>(k, i, fp8_table), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8<T>(k, i + 8, fp8_table), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8<T>(k, i, fp8_table), acc0);
  float sum = hsum_ps(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += q[i] * load1<T>(k, i, fp8_table);
  return sum;
}

template <int T>
void attend_typed(const float* q, const float* fp8_table, const uint8_t* const* k_blocks,
                  const uint8_t* const* v_blocks, int64_t block_size, int64_t scales_offset, int64_t n_pos,
                  int64_t n_head, int64_t n_head_kv, int64_t head_dim, float scale, int64_t head_begin,
                  int64_t head_end, float* scratch, float* out) {
  constexpr bool kScaled = T == kI8 || T == kFP8;
  const int64_t group = n_head / n_head_kv;
  const int64_t row_bytes = n_head_kv * head_dim * element_bytes<T>();
  auto head_scale = [&](const uint8_t* block, int64_t slot, int64_t g) {
    float s = 1.0f;
    if constexpr (kScaled) std::memcpy(&s, block + scales_offset + (slot * n_head_kv + g) * 4, 4);
    return s;
  };
  for (int64_t h = head_begin; h < head_end; ++h) {
    const float* qh = q + h * head_dim;
    const int64_t g = h / group;
    const int64_t head_offset = g * head_dim * element_bytes<T>();
    for (int64_t p = 0; p < n_pos; ++p) {
      const uint8_t* block = k_blocks[p / block_size];
      const int64_t slot = p % block_size;
      scratch[p] = dot<T>(qh, block + slot * row_bytes + head_offset, head_dim, fp8_table) *
                   head_scale(block, slot, g) * scale;
    }
    softmax(scratch, n_pos);
    float* oh = out + h * head_dim;
    const int64_t n_vec = head_dim / 8 * 8;
    // Accumulate 64 output lanes at a time in registers.
    for (int64_t i0 = 0; i0 < n_vec; i0 += 64) {
      const int nv = static_cast<int>((n_vec - i0 < 64 ? n_vec - i0 : 64) / 8);
      __m256 acc[8];
      for (int j = 0; j < nv; ++j) acc[j] = _mm256_setzero_ps();
      for (int64_t p = 0; p < n_pos; ++p) {
        const uint8_t* block = v_blocks[p / block_size];
        const int64_t slot = p % block_size;
        const uint8_t* v = block + slot * row_bytes + head_offset;
        const __m256 w = _mm256_set1_ps(scratch[p] * head_scale(block, slot, g));
        for (int j = 0; j < nv; ++j) acc[j] = _mm256_fmadd_ps(w, load8<T>(v, i0 + 8 * j, fp8_table), acc[j]);
      }
      for (int j = 0; j < nv; ++j) _mm256_storeu_ps(oh + i0 + 8 * j, acc[j]);
    }
    for (int64_t i = n_vec; i < head_dim; ++i) {
      float acc = 0.0f;
      for (int64_t p = 0; p < n_pos; ++p) {
        const uint8_t* block = v_blocks[p / block_size];
        const int64_t slot = p % block_size;
        acc += scratch[p] * head_scale(block, slot, g) * load1<T>(block + slot * row_bytes + head_offset, i, fp8_table);
      }
      oh[i] = acc;
    }
  }
}

}  // namespace

void attend(const float* q, int kv_type, const float* fp8_table, const uint8_t* const* k_blocks,
            const uint8_t* const* v_blocks, int64_t block_size, int64_t scales_offset, int64_t n_pos, int64_t n_head,
            int64_t n_head_kv, int64_t head_dim, float scale, int64_t head_begin, int64_t head_end, float* scratch,
            float* out) {
  switch (kv_type) {
#define TESSERA_ATTEND_CASE(T)                                                                                   \
  case T:                                                                                                        \
    return attend_typed<T>(q, fp8_table, k_blocks, v_blocks, block_size, scales_offset, n_pos, n_head, n_head_kv, \
                           head_dim, scale, head_begin, head_end, scratch, out);
    TESSERA_ATTEND_CASE(kF32)
    TESSERA_ATTEND_CASE(kF16)
    TESSERA_ATTEND_CASE(kBF16)
    TESSERA_ATTEND_CASE(kI8)
    TESSERA_ATTEND_CASE(kFP8)
#undef TESSERA_ATTEND_CASE
  }
}

}  // namespace tessera::kernels::avx2
