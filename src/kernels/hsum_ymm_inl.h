// The horizontal sum of a ymm's 8 floats that every 256-bit kernel ends a reduction with, in one fixed order:
// the two 128-bit halves added, then the upper pair onto the lower, then lane 1 onto lane 0. A result's bits
// depend on that order, so the tiles of one type (and the AVX2 and AVX-512 paths that must agree) share this
// one definition. Anonymous namespace, for the reason matmul_ymm_inl.h gives.
#pragma once

#include <immintrin.h>

#include "kernels/static_for.h"

namespace tessera::kernels {
namespace {

TESSERA_INLINE inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace tessera::kernels
