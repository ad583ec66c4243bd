// Scalar conversions between float and the 16-bit float formats (IEEE half, bfloat16).
#pragma once

#include <cstdint>
#include <cstring>

namespace tessera {

inline float fp32_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t fp32_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// Exact conversion of every half value, subnormals, infinities and NaN included.
inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return fp32_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return fp32_from_bits(sign);
    // Subnormal half: value = mantissa * 2^-24, exactly representable in float.
    float value = float(mantissa) * (1.0f / 16777216.0f);
    return sign ? -value : value;
  }
  return fp32_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// Round-to-nearest-even, with overflow to infinity and NaN preserved (quiet).
inline uint16_t fp32_to_fp16(float f) {
  const uint32_t bits = fp32_to_bits(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return uint16_t(sign | 0x7e00);  // NaN
  if (abs_bits >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds to >= 65536: inf
  if (abs_bits < 0x38800000u) {
    // Result is subnormal or zero: scale so the half's subnormal step becomes one unit, round to nearest even.
    const float magnitude = fp32_from_bits(abs_bits) * 16777216.0f;  // 2^24
    // Adding 2^23 pushes the fraction out of float's mantissa with round-to-nearest-even.
    const uint32_t rounded = fp32_to_bits(magnitude + 8388608.0f) - 0x4b000000u;
    return uint16_t(sign | rounded);
  }
  const uint32_t mantissa_odd = (abs_bits >> 13) & 1;
  const uint32_t rounded = abs_bits + 0xfffu + mantissa_odd;
  return uint16_t(sign | ((rounded - (112u << 23)) >> 13));
}

inline float bf16_to_fp32(uint16_t h) { return fp32_from_bits(uint32_t(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  uint32_t bits = fp32_to_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // keep NaN a NaN
  bits += 0x7fffu + ((bits >> 16) & 1);  // round to nearest even
  return uint16_t(bits >> 16);
}

}  // namespace tessera
