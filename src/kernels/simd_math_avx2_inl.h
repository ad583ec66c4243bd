// Vector math shared by the AVX2 element-wise kernels; included inside an anonymous namespace of an AVX2 file.

// exp(x) for 8 floats, within about 2 ulp of expf over the float range; -inf and anything below the smallest
// normal result give exactly 0 (masked attention scores), large inputs saturate at about 2^127.
inline __m256 exp_ps(__m256 x) {
  const __m256 too_small = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33f), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.33f)), _mm256_set1_ps(88.37f));
  // exp(x) = 2^n · exp(r): n = round(x / ln 2), r = x − n·ln 2 with ln 2 split so n·ln2_hi is exact.
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  // Taylor series to r^7 on |r| ≤ ln2/2: truncation below 1e-8 relative.
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(too_small, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

inline float hmax_ps(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Mask selecting the first n lanes (all 8 when n ≥ 8), for loads and stores of a row's tail.
inline __m256i tail_mask(int64_t n) {
  const int k = n < 8 ? static_cast<int>(n) : 8;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
