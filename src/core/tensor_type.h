// Tensor element types as numbered in GGUF (ggml's type ids), with their block layout: lookups into the
// weight-type registry (core/weight_types.h), which holds these facts and the rest of what Tessera knows per type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

// Values are the on-disk GGUF ids; do not renumber.
enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
  // Tessera's low-bit weight types. In-memory only: never written as a GGUF type id (other tools could not read
  // it). On disk they are I8 tensors of raw bytes with companion tensors and a `tessera.quant.<name>.format`
  // key; see src/kernels/lowbit.h.
  FP8_E4M3 = 1000,  // one E4M3 byte per weight, fp32 scale per output row
  INT4 = 1001,      // nibbles in 32-value chunks (16 bytes), fp16 scale and zero point per group
};

// True for the in-memory-only types above.
inline bool is_internal_tensor_type(TensorType type) { return static_cast<uint32_t>(type) >= 1000; }

struct TensorTypeTraits {
  TensorType type;
  std::string_view name;
  uint32_t block_elements;  // elements per block (1 for plain types)
  uint32_t block_bytes;     // bytes per block
};

// Traits for a GGUF type id; empty for ids Tessera does not know (the loader reports them by number).
std::optional<TensorTypeTraits> tensor_type_traits(uint32_t type_id);
const TensorTypeTraits& traits(TensorType type);
std::string_view tensor_type_name(TensorType type);

// Bytes needed for `n_elements` of `type`; n_elements must be a multiple of the block size.
inline uint64_t tensor_row_bytes(TensorType type, uint64_t n_elements) {
  const TensorTypeTraits& t = traits(type);
  return n_elements / t.block_elements * t.block_bytes;
}

}  // namespace tessera
