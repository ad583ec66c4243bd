// KV storage type names.
#include "core/kv_type.h"

namespace tessera {

const char* kv_type_name(KvType type) {
  switch (type) {
    case KvType::F32: return "f32";
    case KvType::F16: return "f16";
    case KvType::BF16: return "bf16";
    case KvType::I8: return "int8";
    case KvType::FP8: return "fp8";
  }
  return "?";
}

std::optional<KvType> kv_type_from_name(std::string_view name) {
  if (name == "f32") return KvType::F32;
  if (name == "f16") return KvType::F16;
  if (name == "bf16") return KvType::BF16;
  if (name == "int8" || name == "i8" || name == "q8") return KvType::I8;
  if (name == "fp8" || name == "fp8_e4m3") return KvType::FP8;
  return std::nullopt;
}

std::string kv_type_names() {
  std::string names;
  for (KvType t : kKvTypes) names += (names.empty() ? "" : ", ") + std::string(kv_type_name(t));
  return names;
}

}  // namespace tessera
