// FP8 E4M3 weights as fp16 bits, for the x86 kernels that widen them to fp32 with F16C (matmul_fp8_avx2.cpp's
// rows, the FP8 panels of matmul_float_avx2.cpp and matmul_float_avx512.cpp). Anonymous namespace, for the
// reason matmul_ymm_inl.h gives.
//
// E4M3 → fp16 is a shift: the sign stays on top and the 7 magnitude bits move into the fp16 exponent and
// mantissa (bias 7 against 15, so the fp16 value is the E4M3 value · 2^-8, subnormals included, exactly); the
// 2^8 goes into the row scale. From a byte sign-extended to 16 bits (vpmovsxbw), one shift left by 7 puts the
// magnitude in bits 7-13 and copies of the sign in bits 14 and 15, and one AND clears bit 14: two operations per
// vector of words (a zero-extended byte took a shift left by 8 and an arithmetic shift right by 1).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tessera::kernels {
namespace {

constexpr uint16_t kFp16OfFp8Mask = 0xBF80;  // the sign (bit 15) and the magnitude (bits 7-13)

// One byte (vector tails), the same bits as the vector forms.
inline uint16_t fp16_bits_of_fp8(uint8_t b) {
  return static_cast<uint16_t>((static_cast<int8_t>(b) * 128) & kFp16OfFp8Mask);
}

// 16 bytes, sign-extended to words.
inline __m256i fp16_bits_of_fp8(__m256i sign_extended) {
  return _mm256_and_si256(_mm256_slli_epi16(sign_extended, 7), _mm256_set1_epi16(static_cast<int16_t>(kFp16OfFp8Mask)));
}

#if defined(__AVX512BW__) || defined(TESSERA_AVX512_EMULATED)
// 32 bytes, sign-extended to words.
inline __m512i fp16_bits_of_fp8(__m512i sign_extended) {
  return _mm512_and_si512(_mm512_slli_epi16(sign_extended, 7), _mm512_set1_epi16(static_cast<int16_t>(kFp16OfFp8Mask)));
}
#endif

}  // namespace
}  // namespace tessera::kernels
