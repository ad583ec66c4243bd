// Force-included (-include) into the kernels' *_avx512.cpp files for the emulated AVX-512 test build
// (tests/avx512_emulation/CMakeLists.txt): every AVX-512 intrinsic those files use becomes SIMDe's portable
// implementation (libsimde-dev), which runs on AVX2. The 512-bit tiles' indexing, remainders and integer
// sums can then be tested on machines without AVX-512; their speed cannot.
//
// SIMDe's native aliases are not used: they typedef __m512 & co., which <immintrin.h> already declares. Instead
// each name the kernels use is a macro for its SIMDe (or, where SIMDe 0.7.4~rc2 (Debian 12) lacks it, this file's) version; a
// kernel that starts using another AVX-512 intrinsic fails to compile here until it is added below.
#pragma once

#ifndef TESSERA_AVX512_EMULATED
#error "avx512_on_avx2.h is for the emulated AVX-512 test build, which defines TESSERA_AVX512_EMULATED"
#endif
#if defined(__AVX512F__)
#error "the emulated AVX-512 build compiles for AVX2: drop the -mavx512* flags"
#endif

#include <immintrin.h>
#include <simde/x86/avx512.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// Lanes<Lane, simde__m512> drops the vector types' alignment attributes as template arguments, harmlessly: its
// array member is only copied to and from them with memcpy.
#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace tessera::avx512_emulation {

// Lane access through memcpy: SIMDe's vector types are 64-byte values whatever their implementation.
template <typename Lane, typename Vec>
struct Lanes {
  static_assert(sizeof(Vec) % sizeof(Lane) == 0);
  Lane v[sizeof(Vec) / sizeof(Lane)];
  static Lanes of(const Vec& x) {
    Lanes l;
    std::memcpy(l.v, &x, sizeof(Vec));
    return l;
  }
  Vec vec() const {
    Vec x;
    std::memcpy(&x, v, sizeof(Vec));
    return x;
  }
};

inline bool bit(uint64_t mask, int i) { return (mask >> i) & 1u; }

// The aligned loads and stores fault on an address that is not a multiple of 64; SIMDe's would not.
inline const void* require_aligned(const void* p, const char* intrinsic) {
  if (reinterpret_cast<uintptr_t>(p) % 64 != 0) {
    std::fprintf(stderr, "%s at %p: not 64-byte aligned, which faults on a real AVX-512 CPU\n", intrinsic, p);
    std::abort();
  }
  return p;
}
inline simde__m512 mm512_load_ps(const void* p) {
  return simde_mm512_loadu_ps(require_aligned(p, "_mm512_load_ps"));
}
inline simde__m512i mm512_load_si512(const void* p) {
  return simde_mm512_loadu_si512(require_aligned(p, "_mm512_load_si512"));
}
inline void mm512_store_si512(void* p, simde__m512i a) {
  require_aligned(p, "_mm512_store_si512");
  simde_mm512_storeu_si512(p, a);
}

// The intrinsics SIMDe 0.7.4 lacks, lane by lane with the instructions' semantics. Masked loads and stores touch
// only the lanes their mask selects, as the instructions do (they are used at row ends where the rest of a
// vector would lie past the buffer).

inline simde__m256i mm256_maskz_loadu_epi16(uint16_t k, const void* p) {
  Lanes<int16_t, simde__m256i> r{};
  for (int i = 0; i < 16; ++i)
    if (bit(k, i)) std::memcpy(&r.v[i], static_cast<const char*>(p) + 2 * i, 2);
  return r.vec();
}

// vpmovdw: each int32 lane's low 16 bits (SIMDe 0.7.4 has no 512-bit version).
inline simde__m256i mm512_cvtepi32_epi16(simde__m512i v) {
  const auto in = Lanes<int32_t, simde__m512i>::of(v);
  Lanes<int16_t, simde__m256i> r{};
  for (int i = 0; i < 16; ++i) r.v[i] = static_cast<int16_t>(in.v[i]);
  return r.vec();
}

inline void mm256_mask_storeu_epi16(void* p, uint16_t k, simde__m256i v) {
  const auto l = Lanes<int16_t, simde__m256i>::of(v);
  for (int i = 0; i < 16; ++i)
    if (bit(k, i)) std::memcpy(static_cast<char*>(p) + 2 * i, &l.v[i], 2);
}

inline simde__m128i mm_maskz_loadu_epi8(uint16_t k, const void* p) {
  Lanes<int8_t, simde__m128i> r{};
  for (int i = 0; i < 16; ++i)
    if (bit(k, i)) std::memcpy(&r.v[i], static_cast<const char*>(p) + i, 1);
  return r.vec();
}

inline simde__m512 mm512_maskz_loadu_ps(uint16_t k, const void* p) {
  Lanes<float, simde__m512> r{};
  for (int i = 0; i < 16; ++i)
    if (bit(k, i)) std::memcpy(&r.v[i], static_cast<const char*>(p) + 4 * i, 4);
  return r.vec();
}

inline void mm512_mask_storeu_ps(void* p, uint16_t k, simde__m512 a) {
  const auto x = Lanes<float, simde__m512>::of(a);
  for (int i = 0; i < 16; ++i)
    if (bit(k, i)) std::memcpy(static_cast<char*>(p) + 4 * i, &x.v[i], 4);
}

inline void mm512_mask_storeu_epi32(void* p, uint16_t k, simde__m512i a) {
  const auto x = Lanes<int32_t, simde__m512i>::of(a);
  for (int i = 0; i < 16; ++i)
    if (bit(k, i)) std::memcpy(static_cast<char*>(p) + 4 * i, &x.v[i], 4);
}

inline simde__m512 mm512_mask_i32gather_ps(simde__m512 src, uint16_t k, simde__m512i index, const void* base,
                                           int scale) {
  auto r = Lanes<float, simde__m512>::of(src);
  const auto idx = Lanes<int32_t, simde__m512i>::of(index);
  for (int i = 0; i < 16; ++i)
    if (bit(k, i))
      std::memcpy(&r.v[i], static_cast<const char*>(base) + static_cast<int64_t>(idx.v[i]) * scale, 4);
  return r.vec();
}

inline void mm512_mask_i32scatter_epi32(void* base, uint16_t k, simde__m512i index, simde__m512i v, int scale) {
  const auto idx = Lanes<int32_t, simde__m512i>::of(index);
  const auto x = Lanes<int32_t, simde__m512i>::of(v);
  for (int i = 0; i < 16; ++i)
    if (bit(k, i)) std::memcpy(static_cast<char*>(base) + static_cast<int64_t>(idx.v[i]) * scale, &x.v[i], 4);
}

inline uint16_t mm512_cmplt_epi32_mask(simde__m512i a, simde__m512i b) {
  const auto x = Lanes<int32_t, simde__m512i>::of(a), y = Lanes<int32_t, simde__m512i>::of(b);
  uint16_t k = 0;
  for (int i = 0; i < 16; ++i)
    if (x.v[i] < y.v[i]) k |= static_cast<uint16_t>(1u << i);
  return k;
}

// The conversions run the AVX2 instruction on each 256-bit half: same rounding (MXCSR) and overflow results.
inline simde__m512 mm512_cvtepi32_ps(simde__m512i a) {
  const auto x = Lanes<__m256i, simde__m512i>::of(a);
  return Lanes<__m256, simde__m512>{{_mm256_cvtepi32_ps(x.v[0]), _mm256_cvtepi32_ps(x.v[1])}}.vec();
}

inline simde__m512i mm512_cvtps_epi32(simde__m512 a) {
  const auto x = Lanes<__m256, simde__m512>::of(a);
  return Lanes<__m256i, simde__m512i>{{_mm256_cvtps_epi32(x.v[0]), _mm256_cvtps_epi32(x.v[1])}}.vec();
}

inline simde__m512 mm512_cvtph_ps(simde__m256i a) {
  const auto x = Lanes<__m128i, simde__m256i>::of(a);
  return Lanes<__m256, simde__m512>{{_mm256_cvtph_ps(x.v[0]), _mm256_cvtph_ps(x.v[1])}}.vec();
}

template <typename From, typename Vec>
inline simde__m512i widen_to_epi32(Vec a) {
  const auto x = Lanes<From, Vec>::of(a);
  Lanes<int32_t, simde__m512i> r;
  for (int i = 0; i < 16; ++i) r.v[i] = x.v[i];
  return r.vec();
}
inline simde__m512i mm512_cvtepi8_epi32(simde__m128i a) { return widen_to_epi32<int8_t>(a); }
inline simde__m512i mm512_cvtepu8_epi32(simde__m128i a) { return widen_to_epi32<uint8_t>(a); }
inline simde__m512i mm512_cvtepu16_epi32(simde__m256i a) { return widen_to_epi32<uint16_t>(a); }

inline simde__m512i mm512_srai_epi32(simde__m512i a, unsigned int imm) {
  auto x = Lanes<int32_t, simde__m512i>::of(a);
  const int shift = imm > 31 ? 31 : static_cast<int>(imm);
  for (auto& lane : x.v) lane >>= shift;  // arithmetic for signed values (C++20)
  return x.vec();
}

inline simde__m512 mm512_movehdup_ps(simde__m512 a) {
  auto x = Lanes<float, simde__m512>::of(a);
  for (int i = 0; i < 16; i += 2) x.v[i] = x.v[i + 1];
  return x.vec();
}

inline simde__m512 mm512_zextps256_ps512(simde__m256 a) {
  Lanes<simde__m256, simde__m512> r{{a, simde_mm256_setzero_ps()}};
  return r.vec();
}

inline simde__m512i mm512_zextsi256_si512(simde__m256i a) {
  Lanes<simde__m256i, simde__m512i> r{{a, simde_mm256_setzero_si256()}};
  return r.vec();
}

// GCC's order (avx512fintrin.h): the upper 256 bits with the lower, then the upper 128 with the lower, then lanes
// {0,1} with {2,3}, then lane 0 with lane 1. Keeping it keeps the emulated sums' bits those of the real build.
template <typename Op>
inline float reduce_ps(simde__m512 a, Op op) {
  const auto x = Lanes<float, simde__m512>::of(a);
  float t8[8], t4[4];
  for (int i = 0; i < 8; ++i) t8[i] = op(x.v[i + 8], x.v[i]);
  for (int i = 0; i < 4; ++i) t4[i] = op(t8[i + 4], t8[i]);
  const float s0 = op(t4[0], t4[2]), s1 = op(t4[1], t4[3]);
  return op(s0, s1);
}
inline float mm512_reduce_add_ps(simde__m512 a) {
  return reduce_ps(a, [](float x, float y) { return x + y; });
}
inline float mm512_reduce_max_ps(simde__m512 a) {
  return reduce_ps(a, [](float x, float y) { return x > y ? x : y; });
}

}  // namespace tessera::avx512_emulation

#define TESSERA_EMULATED(name) ::tessera::avx512_emulation::name

#undef __m512
#define __m512 simde__m512
#undef __m512i
#define __m512i simde__m512i
#define __m512bh simde__m512bh

#undef _mm256_mask_storeu_epi16
#define _mm256_mask_storeu_epi16 TESSERA_EMULATED(mm256_mask_storeu_epi16)
#undef _mm256_maskz_loadu_epi16
#define _mm256_maskz_loadu_epi16 TESSERA_EMULATED(mm256_maskz_loadu_epi16)
#undef _mm512_cvtepi32_epi16
#define _mm512_cvtepi32_epi16 TESSERA_EMULATED(mm512_cvtepi32_epi16)
#undef _mm_maskz_loadu_epi8
#define _mm_maskz_loadu_epi8 TESSERA_EMULATED(mm_maskz_loadu_epi8)
#undef _mm512_maskz_loadu_ps
#define _mm512_maskz_loadu_ps TESSERA_EMULATED(mm512_maskz_loadu_ps)
#undef _mm512_mask_storeu_ps
#define _mm512_mask_storeu_ps TESSERA_EMULATED(mm512_mask_storeu_ps)
#undef _mm512_mask_storeu_epi32
#define _mm512_mask_storeu_epi32 TESSERA_EMULATED(mm512_mask_storeu_epi32)
#undef _mm512_mask_i32gather_ps
#define _mm512_mask_i32gather_ps TESSERA_EMULATED(mm512_mask_i32gather_ps)
#undef _mm512_mask_i32scatter_epi32
#define _mm512_mask_i32scatter_epi32 TESSERA_EMULATED(mm512_mask_i32scatter_epi32)
#undef _mm512_cmplt_epi32_mask
#define _mm512_cmplt_epi32_mask TESSERA_EMULATED(mm512_cmplt_epi32_mask)
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps TESSERA_EMULATED(mm512_cvtepi32_ps)
#undef _mm512_cvtps_epi32
#define _mm512_cvtps_epi32 TESSERA_EMULATED(mm512_cvtps_epi32)
#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps TESSERA_EMULATED(mm512_cvtph_ps)
#undef _mm512_cvtepi8_epi32
#define _mm512_cvtepi8_epi32 TESSERA_EMULATED(mm512_cvtepi8_epi32)
#undef _mm512_cvtepu8_epi32
#define _mm512_cvtepu8_epi32 TESSERA_EMULATED(mm512_cvtepu8_epi32)
#undef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32 TESSERA_EMULATED(mm512_cvtepu16_epi32)
#undef _mm512_srai_epi32
#define _mm512_srai_epi32 TESSERA_EMULATED(mm512_srai_epi32)
#undef _mm512_movehdup_ps
#define _mm512_movehdup_ps TESSERA_EMULATED(mm512_movehdup_ps)
#undef _mm512_zextps256_ps512
#define _mm512_zextps256_ps512 TESSERA_EMULATED(mm512_zextps256_ps512)
#undef _mm512_zextsi256_si512
#define _mm512_zextsi256_si512 TESSERA_EMULATED(mm512_zextsi256_si512)
#undef _mm512_reduce_add_ps
#define _mm512_reduce_add_ps TESSERA_EMULATED(mm512_reduce_add_ps)
#undef _mm512_reduce_max_ps
#define _mm512_reduce_max_ps TESSERA_EMULATED(mm512_reduce_max_ps)
#undef _mm512_load_ps
#define _mm512_load_ps TESSERA_EMULATED(mm512_load_ps)
#undef _mm512_load_si512
#define _mm512_load_si512 TESSERA_EMULATED(mm512_load_si512)
#undef _mm512_store_si512
#define _mm512_store_si512 TESSERA_EMULATED(mm512_store_si512)

// Everything else the kernels use, from SIMDe. (Each name is #undef'd first: at -O0 <immintrin.h> defines some
// intrinsics that take immediates as macros.)
#undef _mm256_dpbusd_epi32
#define _mm256_dpbusd_epi32 simde_mm256_dpbusd_epi32
#undef _mm512_add_epi16
#define _mm512_add_epi16 simde_mm512_add_epi16
#undef _mm512_add_epi32
#define _mm512_add_epi32 simde_mm512_add_epi32
#undef _mm512_add_ps
#define _mm512_add_ps simde_mm512_add_ps
#undef _mm512_and_si512
#define _mm512_and_si512 simde_mm512_and_si512
#undef _mm512_broadcast_f32x8
#define _mm512_broadcast_f32x8 simde_mm512_broadcast_f32x8
#undef _mm512_broadcast_i32x4
#define _mm512_broadcast_i32x4 simde_mm512_broadcast_i32x4
#undef _mm512_broadcast_i64x4
#define _mm512_broadcast_i64x4 simde_mm512_broadcast_i64x4
#undef _mm512_castps512_ps128
#define _mm512_castps512_ps128 simde_mm512_castps512_ps128
#undef _mm512_castps512_ps256
#define _mm512_castps512_ps256 simde_mm512_castps512_ps256
#undef _mm512_castsi512_ps
#define _mm512_castsi512_ps simde_mm512_castsi512_ps
#undef _mm512_castsi512_si256
#define _mm512_castsi512_si256 simde_mm512_castsi512_si256
#undef _mm512_cmp_ps_mask
#define _mm512_cmp_ps_mask simde_mm512_cmp_ps_mask
#undef _mm512_cvtepi8_epi16
#define _mm512_cvtepi8_epi16 simde_mm512_cvtepi8_epi16
#undef _mm512_div_ps
#define _mm512_div_ps simde_mm512_div_ps
#undef _mm512_loadu_si512
#define _mm512_loadu_si512 simde_mm512_loadu_si512
#undef _mm512_storeu_si512
#define _mm512_storeu_si512 simde_mm512_storeu_si512
#undef _mm512_unpackhi_epi16
#define _mm512_unpackhi_epi16 simde_mm512_unpackhi_epi16
#undef _mm512_unpacklo_epi16
#define _mm512_unpacklo_epi16 simde_mm512_unpacklo_epi16
#undef _mm512_unpackhi_epi32
#define _mm512_unpackhi_epi32 simde_mm512_unpackhi_epi32
#undef _mm512_unpacklo_epi32
#define _mm512_unpacklo_epi32 simde_mm512_unpacklo_epi32
#undef _mm512_unpackhi_epi64
#define _mm512_unpackhi_epi64 simde_mm512_unpackhi_epi64
#undef _mm512_unpacklo_epi64
#define _mm512_unpacklo_epi64 simde_mm512_unpacklo_epi64
#undef _mm512_permutex2var_ps
#define _mm512_permutex2var_ps simde_mm512_permutex2var_ps
#undef _mm512_mask_blend_epi32
#define _mm512_mask_blend_epi32 simde_mm512_mask_blend_epi32
#undef _mm512_castps_si512
#define _mm512_castps_si512 simde_mm512_castps_si512
#undef _mm512_srli_epi32
#define _mm512_srli_epi32 simde_mm512_srli_epi32
#undef _mm512_dpbf16_ps
#define _mm512_dpbf16_ps simde_mm512_dpbf16_ps
#undef _mm512_dpbusd_epi32
#define _mm512_dpbusd_epi32 simde_mm512_dpbusd_epi32
#undef _mm512_extracti64x4_epi64
#define _mm512_extracti64x4_epi64 simde_mm512_extracti64x4_epi64
#undef _mm512_fmadd_ps
#define _mm512_fmadd_ps simde_mm512_fmadd_ps
#undef _mm512_fnmadd_ps
#define _mm512_fnmadd_ps simde_mm512_fnmadd_ps
#undef _mm512_inserti64x4
#define _mm512_inserti64x4 simde_mm512_inserti64x4
#undef _mm512_loadu_ps
#define _mm512_loadu_ps simde_mm512_loadu_ps
#undef _mm512_madd_epi16
#define _mm512_madd_epi16 simde_mm512_madd_epi16
#undef _mm512_maddubs_epi16
#define _mm512_maddubs_epi16 simde_mm512_maddubs_epi16
#undef _mm512_mask_blend_epi16
#define _mm512_mask_blend_epi16 simde_mm512_mask_blend_epi16
#undef _mm512_mask_broadcast_f32x8
#define _mm512_mask_broadcast_f32x8 simde_mm512_mask_broadcast_f32x8
#undef _mm512_mask_broadcast_i64x4
#define _mm512_mask_broadcast_i64x4 simde_mm512_mask_broadcast_i64x4
#undef _mm512_mask_max_ps
#define _mm512_mask_max_ps simde_mm512_mask_max_ps
#undef _mm512_maskz_mov_ps
#define _mm512_maskz_mov_ps simde_mm512_maskz_mov_ps
#undef _mm512_maskz_mul_ps
#define _mm512_maskz_mul_ps simde_mm512_maskz_mul_ps
#undef _mm512_max_ps
#define _mm512_max_ps simde_mm512_max_ps
#undef _mm512_min_ps
#define _mm512_min_ps simde_mm512_min_ps
#undef _mm512_mullo_epi16
#define _mm512_mullo_epi16 simde_mm512_mullo_epi16
#undef _mm512_mullo_epi32
#define _mm512_mullo_epi32 simde_mm512_mullo_epi32
#undef _mm512_mul_ps
#define _mm512_mul_ps simde_mm512_mul_ps
#undef _mm512_or_si512
#define _mm512_or_si512 simde_mm512_or_si512
#undef _mm512_permutexvar_ps
#define _mm512_permutexvar_ps simde_mm512_permutexvar_ps
#undef _mm512_roundscale_ps
#define _mm512_roundscale_ps simde_mm512_roundscale_ps
#undef _mm512_set1_epi16
#define _mm512_set1_epi16 simde_mm512_set1_epi16
#undef _mm512_set1_epi32
#define _mm512_set1_epi32 simde_mm512_set1_epi32
#undef _mm512_set1_epi64
#define _mm512_set1_epi64 simde_mm512_set1_epi64
#undef _mm512_set1_epi8
#define _mm512_set1_epi8 simde_mm512_set1_epi8
#undef _mm512_set1_ps
#define _mm512_set1_ps simde_mm512_set1_ps
#undef _mm512_set4_epi32
#define _mm512_set4_epi32 simde_mm512_set4_epi32
#undef _mm512_setr_epi32
#define _mm512_setr_epi32 simde_mm512_setr_epi32
#undef _mm512_setzero_ps
#define _mm512_setzero_ps simde_mm512_setzero_ps
#undef _mm512_setzero_si512
#define _mm512_setzero_si512 simde_mm512_setzero_si512
#undef _mm512_shuffle_epi8
#define _mm512_shuffle_epi8 simde_mm512_shuffle_epi8
#undef _mm512_shuffle_f32x4
#define _mm512_shuffle_f32x4 simde_mm512_shuffle_f32x4
#undef _mm512_shuffle_i32x4
#define _mm512_shuffle_i32x4 simde_mm512_shuffle_i32x4
#undef _mm512_shuffle_ps
#define _mm512_shuffle_ps simde_mm512_shuffle_ps
#undef _mm512_slli_epi16
#define _mm512_slli_epi16 simde_mm512_slli_epi16
#undef _mm512_slli_epi32
#define _mm512_slli_epi32 simde_mm512_slli_epi32
#undef _mm512_srli_epi16
#define _mm512_srli_epi16 simde_mm512_srli_epi16
#undef _mm512_storeu_ps
#define _mm512_storeu_ps simde_mm512_storeu_ps
#undef _mm512_sub_epi32
#define _mm512_sub_epi32 simde_mm512_sub_epi32
#undef _mm512_sub_ps
#define _mm512_sub_ps simde_mm512_sub_ps
#undef _mm512_xor_si512
#define _mm512_xor_si512 simde_mm512_xor_si512
