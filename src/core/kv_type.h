// How the KV cache stores keys and values: the element type and its name on the command line. Used by the KV
// pool, the attention kernels, the engine and the CLI alike, so it lives below all of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// How cached keys and values are stored. I8 and FP8 carry one fp32 scale per (token, kv head): symmetric
// absmax scaling, so a head's outlier never costs another head precision.
enum class KvType { F32, F16, BF16, I8, FP8 };
inline constexpr KvType kKvTypes[] = {KvType::F32, KvType::F16, KvType::BF16, KvType::I8, KvType::FP8};

const char* kv_type_name(KvType type);
std::optional<KvType> kv_type_from_name(std::string_view name);  // "f32", "f16", "bf16", "int8"/"i8", "fp8"
std::string kv_type_names();  // every type's name, ", "-separated: for help texts and errors
inline int64_t kv_element_bytes(KvType t) { return t == KvType::F32 ? 4 : (t == KvType::F16 || t == KvType::BF16) ? 2 : 1; }
inline bool kv_type_has_scales(KvType t) { return t == KvType::I8 || t == KvType::FP8; }

}  // namespace tessera
