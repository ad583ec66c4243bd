// cpuid/xgetbv probing. Only baseline instructions here; the probe is what decides whether wider ones may run.
#include "core/cpu_features.h"

#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstdio>

namespace tessera {
namespace {

uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

// Linux hands out the 8 KiB of AMX tile data per process on request (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA, since 5.16): granted once, it holds for every thread of the process.
bool request_tile_data() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatures probe() {
  CpuFeatures f;
  unsigned eax, ebx, ecx, edx;
  unsigned max_leaf = 0, vendor[3] = {0, 0, 0};
  __cpuid(0, max_leaf, vendor[0], vendor[2], vendor[1]);  // the vendor string is in ebx, edx, ecx
  const bool amd = vendor[0] == 0x68747541 && vendor[1] == 0x69746e65 && vendor[2] == 0x444d4163;  // "AuthenticAMD"
  f.intel = vendor[0] == 0x756e6547 && vendor[1] == 0x49656e69 && vendor[2] == 0x6c65746e;      // "GenuineIntel"
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const unsigned base_family = (eax >> 8) & 0xf;
  const unsigned family = base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family;
  const bool osxsave = ecx & bit_OSXSAVE;
  const bool avx = ecx & bit_AVX;
  f.fma = ecx & bit_FMA;
  f.f16c = ecx & bit_F16C;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = read_xcr0();
  f.os_saves_ymm = (xcr0 & 0x6) == 0x6;             // SSE and AVX state
  f.os_saves_zmm = (xcr0 & 0xe6) == 0xe6;           // plus opmask, ZMM_Hi256, Hi16_ZMM
  const bool os_saves_tiles = (xcr0 & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = ebx & bit_AVX2;
  f.avx512f = ebx & bit_AVX512F;
  f.avx512dq = ebx & bit_AVX512DQ;
  f.avx512bw = ebx & bit_AVX512BW;
  f.avx512vl = ebx & bit_AVX512VL;
  f.avx512vnni = ecx & bit_AVX512VNNI;
  f.amx_bf16 = edx & (1u << 22);
  f.amx_tile = edx & (1u << 24);
  f.amx_int8 = edx & (1u << 25);
  __cpuid_count(7, 1, eax, ebx, ecx, edx);
  f.avx512bf16 = eax & (1u << 5);
  f.zmm_on_256bit_units = amd && family == 0x19 && f.avx512f;
  f.os_grants_tiles = os_saves_tiles && f.amx_tile && request_tile_data();
#ifdef TESSERA_AVX512_EMULATED
  // The emulated AVX-512 test build (tests/avx512_emulation): its *_avx512.cpp kernels are SIMDe code compiled for
  // AVX2, so a CPU with AVX2 runs them. Only that build's copy of this library is compiled with the macro.
  if (f.avx2 && f.fma && f.f16c && f.os_saves_ymm) {
    f.avx512f = f.avx512dq = f.avx512bw = f.avx512vl = f.avx512vnni = f.avx512bf16 = true;
    f.os_saves_zmm = true;
  }
  f.amx_tile = f.amx_int8 = f.amx_bf16 = f.os_grants_tiles = false;  // SIMDe has no tiles
#endif
  return f;
}

Isa level_of(const CpuFeatures& f) {
  if (!(f.os_saves_ymm && f.avx2 && f.fma && f.f16c)) return Isa::Scalar;
  if (!(f.os_saves_zmm && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) return Isa::Avx2;
  if (!f.avx512vnni) return Isa::Avx512;
  if (!f.avx512bf16) return Isa::Avx512Vnni;
  if (!(f.amx_tile && f.amx_int8 && f.amx_bf16 && f.os_grants_tiles)) return Isa::Avx512Bf16;
  return Isa::Amx;
}

// Read once per process (a function-local static): threads that race to a setting's first use
// (setting_or_first) all get it, and a bad value is reported once.
Isa env_cap() {
  static const Isa cap = [] {
    const char* env = std::getenv("TESSERA_ISA");
    if (env == nullptr || *env == '\0') return Isa::Amx;
    if (const auto isa = isa_from_name(env)) return *isa;
    std::fprintf(stderr, "tessera: ignoring unknown TESSERA_ISA=%s (expected scalar, avx2, avx512 or amx)\n", env);
    return Isa::Amx;
  }();
  return cap;
}

// -1 until first use; then the cap from TESSERA_ISA, lowered by set_max_isa().
std::atomic<int> g_max_isa{-1};

// A process-wide setting held as an int, -1 until first read: the first reader stores first_value() (from the
// environment, read once: readers racing to it may each call first_value()), unless a setter got there before.
template <typename FirstValue>
int setting_or_first(std::atomic<int>& setting, FirstValue first_value) {
  int value = setting.load(std::memory_order_relaxed);
  if (value < 0) {
    int expected = -1;
    setting.compare_exchange_strong(expected, first_value());
    value = setting.load(std::memory_order_relaxed);
  }
  return value;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = probe();
  return features;
}

Isa detected_isa() {
  static const Isa level = level_of(cpu_features());
  return level;
}

Isa active_isa() {
  const int cap = setting_or_first(g_max_isa, [] { return static_cast<int>(env_cap()); });
  const int detected = static_cast<int>(detected_isa());
  return static_cast<Isa>(cap < detected ? cap : detected);
}

void set_max_isa(Isa isa) { g_max_isa.store(static_cast<int>(isa), std::memory_order_relaxed); }

namespace {
// -1 until first use; then 1 (ymm) or 0 (zmm), from TESSERA_DECODE_TILES or the CPU, or set_decode_tiles_ymm().
std::atomic<int> g_decode_tiles_ymm{-1};

// Read once per process, as env_cap() is.
int decode_tiles_default() {
  static const int value = [] {
    const int by_cpu = cpu_features().zmm_on_256bit_units ? 1 : 0;
    const char* env = std::getenv("TESSERA_DECODE_TILES");
    if (env == nullptr || *env == '\0') return by_cpu;
    if (std::string_view(env) == "ymm") return 1;
    if (std::string_view(env) == "zmm") return 0;
    std::fprintf(stderr, "tessera: ignoring unknown TESSERA_DECODE_TILES=%s (expected ymm or zmm)\n", env);
    return by_cpu;
  }();
  return value;
}
}  // namespace

bool decode_tiles_ymm() { return setting_or_first(g_decode_tiles_ymm, decode_tiles_default) == 1; }

void set_decode_tiles_ymm(bool ymm) { g_decode_tiles_ymm.store(ymm ? 1 : 0, std::memory_order_relaxed); }

namespace {
// -1 until first use; then 1 (zmm) or 0 (ymm), from the CPU or set_decode_kquant_zmm().
std::atomic<int> g_decode_kquant_zmm{-1};
}  // namespace

bool decode_kquant_zmm() {
  return setting_or_first(g_decode_kquant_zmm, [] { return cpu_features().intel ? 1 : 0; }) == 1;
}

void set_decode_kquant_zmm(bool zmm) { g_decode_kquant_zmm.store(zmm ? 1 : 0, std::memory_order_relaxed); }

Isa kernel_isa(Isa isa) {
  if (isa >= Isa::Avx512Vnni) return Isa::Avx512Vnni;
  if (isa >= Isa::Avx2) return Isa::Avx2;
  return Isa::Scalar;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Vnni: return "avx512_vnni";
    case Isa::Avx512Bf16: return "avx512_bf16";
    case Isa::Amx: return "amx";
  }
  return "unknown";
}

std::optional<Isa> isa_from_name(std::string_view name) {
  if (name == "scalar") return Isa::Scalar;
  if (name == "avx2") return Isa::Avx2;
  if (name == "avx512" || name == "avx512_bf16") return Isa::Avx512Bf16;
  if (name == "avx512_vnni") return Isa::Avx512Vnni;
  if (name == "amx") return Isa::Amx;
  if (name == "avx512f" || name == "avx512_novnni") return Isa::Avx512;
  return std::nullopt;
}

}  // namespace tessera
