// AVX-512 probe loops on 512-bit registers, the width the AVX-512 matmul kernels use (matmul_zmm_inl.h):
// fp32 FMA, VNNI vpdpbusd and BF16 vdpbf16ps. On cores with a full 512-bit datapath (Zen 5, Sapphire Rapids)
// each gives twice the 256-bit rate; a ymm probe there would halve every peak and double every ratio.
#include <immintrin.h>

// GCC 12's 512-bit reductions pass _mm512_undefined_*() (a self-initialized variable) as an unused merge
// source, and -W(maybe-)uninitialized reports every inlined use of them (as in the kernels' *_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "bench/roofline_kernels.h"

namespace tessera::roofline {
namespace {

// Twelve independent chains (named, not an array, which GCC would keep in memory) cover two ports × latency
// 4-5 of every instruction probed here. `step` is one dependent operation on an accumulator.
template <typename V, typename Step>
V twelve_chains(int64_t iters, V init[12], Step step) {
  V a0 = init[0], a1 = init[1], a2 = init[2], a3 = init[3], a4 = init[4], a5 = init[5], a6 = init[6], a7 = init[7],
    a8 = init[8], a9 = init[9], a10 = init[10], a11 = init[11];
  for (int64_t i = 0; i < iters; ++i) {
    a0 = step(a0);
    a1 = step(a1);
    a2 = step(a2);
    a3 = step(a3);
    a4 = step(a4);
    a5 = step(a5);
    a6 = step(a6);
    a7 = step(a7);
    a8 = step(a8);
    a9 = step(a9);
    a10 = step(a10);
    a11 = step(a11);
  }
  init[0] = a0, init[1] = a1, init[2] = a2, init[3] = a3, init[4] = a4, init[5] = a5, init[6] = a6, init[7] = a7;
  init[8] = a8, init[9] = a9, init[10] = a10, init[11] = a11;
  return a0;
}

}  // namespace

static_assert(kFmaChains == 12 && kInt8ChainsVnni == 12 && kBf16Chains == 12);

float fma_chains_avx512(int64_t iters) {
  // a ← a·b + c converges to c / (1 − b) = 0.1: no overflow, no denormals, whatever iters is.
  const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-4f);
  __m512 a[12];
  for (int k = 0; k < 12; ++k) a[k] = _mm512_set1_ps(float(k));
  twelve_chains<__m512>(iters, a, [&](__m512 v) { return _mm512_fmadd_ps(v, b, c); });
  float s = 0.0f;
  for (const __m512 v : a) s += _mm512_reduce_add_ps(v);
  return s;
}

int32_t int8_chains_vnni(int64_t iters) {
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  __m512i a[12];
  for (int k = 0; k < 12; ++k) a[k] = _mm512_set1_epi32(k);
  twelve_chains<__m512i>(iters, a, [&](__m512i v) { return _mm512_dpbusd_epi32(v, u, s); });
  int32_t t = 0;
  for (const __m512i v : a) t += _mm512_reduce_add_epi32(v);
  return t;
}

float bf16_chains(int64_t iters) {
  // a ← a + Σ pairs of bf16 products (vdpbf16ps): 0.5 · 2^-10 per pair keeps a small and exact for any run.
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.5f));
  const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0x1p-10f), _mm512_set1_ps(0x1p-10f));
  __m512 a[12];
  for (int k = 0; k < 12; ++k) a[k] = _mm512_set1_ps(float(k));
  twelve_chains<__m512>(iters, a, [&](__m512 v) { return _mm512_dpbf16_ps(v, x, y); });
  float s = 0.0f;
  for (const __m512 v : a) s += _mm512_reduce_add_ps(v);
  return s;
}

}  // namespace tessera::roofline
