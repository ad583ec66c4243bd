// fp16/bf16 conversions: exact round trip for every half value and correct rounding from float.
#include <gtest/gtest.h>

#include <cmath>

#include "core/fp16.h"

namespace tessera {
namespace {

TEST(Fp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f))));
      continue;
    }
    EXPECT_EQ(fp32_to_fp16(f), h) << "half bits 0x" << std::hex << h;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties go to the even mantissa (1.0).
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // rounds up to infinity
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);                               // tie to even (zero)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25) * 1.5f), 0x0001);                        // above the tie
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(fp32_to_bf16(fp32_from_bits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(NAN))));
}

}  // namespace
}  // namespace tessera

#include "core/fp8.h"

namespace tessera {
namespace {

TEST(Fp8E4M3, EveryCodeRoundTripsAndKnownValues) {
  for (int b = 0; b < 256; ++b) {
    const float f = fp8_e4m3_to_fp32(uint8_t(b));
    if (std::isnan(f)) continue;
    if (b == 0x80) {  // -0 keeps its sign
      EXPECT_EQ(fp32_to_fp8_e4m3(f), 0x80);
      continue;
    }
    EXPECT_EQ(fp32_to_fp8_e4m3(f), b) << "code " << b << " value " << f;
  }
  EXPECT_EQ(fp8_e4m3_to_fp32(0x7E), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_fp32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_fp32(0x38), 1.0f);
  EXPECT_EQ(fp32_to_fp8_e4m3(1000.0f), 0x7E);   // saturates
  EXPECT_EQ(fp32_to_fp8_e4m3(-1000.0f), 0xFE);
  EXPECT_EQ(fp32_to_fp8_e4m3(1.0625f), 0x38);   // halfway between 1 and 1.125: to even (1.0)
  EXPECT_EQ(fp32_to_fp8_e4m3(1.1875f), 0x3A);   // halfway between 1.125 and 1.25: to even (1.25)
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_fp32(fp32_to_fp8_e4m3(NAN))));
}

}  // namespace
}  // namespace tessera
