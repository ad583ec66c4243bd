// Run-time CPU capability detection (cpuid + xgetbv) and the process-wide cap on which SIMD level kernels use.
#pragma once

#include <optional>
#include <string_view>

namespace tessera {

// SIMD levels in increasing order; each implies the ones below it. Kernels exist for Scalar, Avx2, Avx512Vnni
// and Amx (AMX tiles for the int8 products that have them; every other product at Amx runs Avx512Vnni's
// kernels); the intermediate levels are reported so logs say what the CPU has.
enum class Isa : int {
  Scalar = 0,
  Avx2 = 1,        // AVX2 + FMA + F16C
  Avx512 = 2,      // + AVX-512 F, BW, VL, DQ
  Avx512Vnni = 3,  // + AVX-512 VNNI
  Avx512Bf16 = 4,  // + AVX-512 BF16
  Amx = 5,         // + AMX-TILE, AMX-INT8 and AMX-BF16, with the kernel's leave to use the tile data (Linux asks)
};

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  bool os_saves_ymm = false, os_saves_zmm = false;  // XCR0: the kernel preserves the wide registers
  // XCR0 holds the tile state and, on Linux, the process was granted it (arch_prctl ARCH_REQ_XCOMP_PERM): without
  // the grant the first tile instruction raises SIGILL.
  bool os_grants_tiles = false;
  // AVX-512 executed as two halves on 256-bit units (AMD Zen 4, family 19h; Zen 5 and Intel's AVX-512 cores have
  // 512-bit datapaths). cpuid does not report it; the vendor and family do.
  bool zmm_on_256bit_units = false;
  // An Intel CPU ("GenuineIntel"): its AVX-512 cores have 512-bit datapaths throughout.
  bool intel = false;
};

const CpuFeatures& cpu_features();

// The best level this CPU and OS support.
Isa detected_isa();

// The level kernels run at: detected_isa() capped by TESSERA_ISA (read once) and by set_max_isa().
Isa active_isa();

// Caps the level for the whole process (e.g. `--isa avx2`); a cap above the CPU's level has no further effect.
void set_max_isa(Isa isa);

// Whether one-token Q4_0x8 matmuls take the 256-bit tiles at the AVX-512 level (kernels/matmul_q4_0_avx512.cpp
// says why): cpu_features().zmm_on_256bit_units, unless TESSERA_DECODE_TILES (ymm or zmm, read once) or
// set_decode_tiles_ymm() chose. Either way the same bits.
bool decode_tiles_ymm();
void set_decode_tiles_ymm(bool ymm);

// Whether one-token Q4_K and Q6_K matmuls take the 512-bit tiles at the AVX-512 level
// (kernels/matmul_kquant_avx512.cpp says why): cpu_features().intel, unless set_decode_kquant_zmm() chose. Either
// way the same bits.
bool decode_kquant_zmm();
void set_decode_kquant_zmm(bool zmm);

// Which kernel family serves `isa`: AVX-512 kernels need VNNI, so Avx512 without it runs the AVX2 kernels; Amx
// runs the AVX-512 kernels, and the matmul dispatch sends the products AMX serves to their tiles.
Isa kernel_isa(Isa isa);

std::string_view isa_name(Isa isa);
// Accepts "scalar", "avx2", "avx512" (the best AVX-512 level without AMX), "amx" and the exact names isa_name()
// returns.
std::optional<Isa> isa_from_name(std::string_view name);

}  // namespace tessera
