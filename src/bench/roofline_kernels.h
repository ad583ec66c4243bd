// Inner loops of the roofline probes, one set per ISA (roofline_avx2.cpp, roofline_avx512.cpp, roofline_amx.cpp).
// Each returns a value derived from everything it computed so that the compiler cannot drop the work.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::roofline {

// Sums n bytes (a multiple of 128; p 32-byte aligned) as 64-bit lanes.
uint64_t read_sum_avx2(const uint8_t* p, size_t n);
// kFmaChains independent 8-lane fp32 FMA chains for `iters` iterations.
inline constexpr int kFmaChains = 12;
float fma_chains_avx2(int64_t iters);
// kFmaChains independent 16-lane fp32 FMA chains (zmm) for `iters` iterations.
float fma_chains_avx512(int64_t iters);
// kInt8Chains maddubs + madd + add chains (AVX2, 32 byte products each per iteration) / 512-bit dpbusd chains
// (VNNI, 64 byte products each).
inline constexpr int kInt8ChainsAvx2 = 4;
inline constexpr int kInt8ChainsVnni = 12;
int32_t int8_chains_avx2(int64_t iters);
// kInt8ProductChainsAvx2 maddubs + 16-bit add chains (AVX2), 32 byte products each per iteration: vpmaddubsw's
// own rate, with its int16 pair sums never widened.
inline constexpr int kInt8ProductChainsAvx2 = 8;
int32_t int8_product_chains_avx2(int64_t iters);
int32_t int8_chains_vnni(int64_t iters);
// kBf16Chains 512-bit vdpbf16ps chains (AVX-512 BF16), 32 bf16 products (64 flops) each per iteration.
inline constexpr int kBf16Chains = 12;
float bf16_chains(int64_t iters);

// AMX (Isa::Amx): 4 tdpbssd on full tiles per iteration (16 × 16 × 64 int8 products each), 4 accumulators.
namespace amx {
inline constexpr int kTileProducts = 16 * 16 * 64;
inline constexpr int kTileMultiplies = 4;
int32_t int8_tiles(int64_t iters);
// The same with tdpbf16ps (16 × 16 × 32 bf16 products each).
inline constexpr int kBf16TileProducts = 16 * 16 * 32;
float bf16_tiles(int64_t iters);
}  // namespace amx

}  // namespace tessera::roofline
