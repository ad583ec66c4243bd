// The default model compiled into the binary (stories260K converted by `tessera convert`; MIT licence).
#pragma once

#include <cstdint>
#include <span>

namespace tessera {

std::span<const uint8_t> embedded_model_bytes();
inline constexpr const char* kEmbeddedModelName = "stories260K (embedded)";

}  // namespace tessera
