// FP8 E4M3 (the OCP "FN" variant used for inference: 4 exponent bits, bias 7, 3 mantissa bits, no infinities,
// NaN = S.1111.111, largest finite ±448) conversions.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace tessera {

inline float fp8_e4m3_to_fp32(uint8_t b) {
  const int exponent = (b >> 3) & 0xF;
  const int mantissa = b & 7;
  float v;
  if (exponent == 0) {
    v = std::ldexp(float(mantissa), -9);  // subnormal: m/8 · 2^-6
  } else if (exponent == 15 && mantissa == 7) {
    v = NAN;
  } else {
    v = std::ldexp(1.0f + float(mantissa) / 8.0f, exponent - 7);
  }
  return (b & 0x80) ? -v : v;
}

// Round to nearest even; magnitudes beyond 448 saturate to ±448 (the usual choice for scaled quantization, where
// an overflow is a rounding artefact, not a signal); NaN maps to NaN.
inline uint8_t fp32_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7E;
  if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9; m == 8 is exactly the smallest normal (0x08)
    return sign | uint8_t(std::lrint(std::ldexp(a, 9)));
  }
  int k;
  const float f = std::frexp(a, &k);  // a = f · 2^k, f in [0.5, 1)
  int e = k - 1;                      // a = (2f) · 2^e
  long m = std::lrint((2.0f * f - 1.0f) * 8.0f);
  if (m == 8) {
    m = 0;
    ++e;
  }
  const int code = ((e + 7) << 3) | int(m);
  return sign | uint8_t(code > 0x7E ? 0x7E : code);
}

// All 256 codes decoded, for table lookups in kernels.
inline const std::array<float, 256>& fp8_e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[size_t(i)] = fp8_e4m3_to_fp32(uint8_t(i));
    return t;
  }();
  return table;
}

}  // namespace tessera
