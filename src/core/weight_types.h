// The weight-type registry: one row per tensor type with all that Tessera knows of it: its names, its block
// layout, whether it is a GGUF type id or Tessera-internal, whether `tessera quantize` writes it, and its matmul
// kernel in each memory layout. The GGUF reader and writer (through core/tensor_type.h), the kernels' dispatch,
// the quantizer and the CLI read it; nothing else keeps a list of weight types. Not for the per-ISA kernel files
// (its lookups are inline functions; they include core/kernel_type.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/kernel_type.h"
#include "core/tensor_type.h"

namespace tessera {

struct WeightTypeInfo {
  TensorTypeTraits traits;    // the type, its GGUF name ("Q8_0", "FP8_E4M3"), block elements and bytes
  std::string_view cli_name;  // what --type takes (make-model, bench, convert, quantize); empty: not offered
  bool on_disk;               // a GGUF type id, read and written as such; else in memory only (tensor_type.h)
  bool quantizer_output;      // `tessera quantize --type <cli_name>` writes it
  uint32_t gguf_file_type;    // llama.cpp's general.file_type for a model quantized to it (Q4_K: 15, its
                              // Q4_K_M); 0: not set
  // The matmul kernel per layout (WeightLayout::Rows, Interleaved8, Panel32); empty: none in that layout (FP8
  // rows and INT4 take kernels/matmul_lowbit.h, types without any are computed by the scalar reference).
  std::optional<KernelType> rows_kernel, interleaved_kernel, panel_kernel;
};

namespace weight_types_detail {
using K = KernelType;
using T = TensorType;
constexpr std::nullopt_t kNone = std::nullopt;
}  // namespace weight_types_detail

// Ordered by GGUF id, internal types last.
inline constexpr auto kWeightTypes = [] {
  using namespace weight_types_detail;
  return std::array{
      //           type, name, block elements, bytes | cli name, on disk, quantizer, file type | kernels: rows, x8, x32
      WeightTypeInfo{{T::F32, "F32", 1, 4}, "f32", true, false, 0, K::F32, kNone, K::F32x32},
      WeightTypeInfo{{T::F16, "F16", 1, 2}, "f16", true, false, 0, K::F16, kNone, K::F16x32},
      WeightTypeInfo{{T::Q4_0, "Q4_0", 32, 18}, "q4_0", true, true, 2, K::Q4_0, K::Q4_0x8, kNone},
      WeightTypeInfo{{T::Q4_1, "Q4_1", 32, 20}, "", true, false, 0, kNone, kNone, kNone},
      WeightTypeInfo{{T::Q5_0, "Q5_0", 32, 22}, "", true, false, 0, kNone, kNone, kNone},
      WeightTypeInfo{{T::Q5_1, "Q5_1", 32, 24}, "", true, false, 0, kNone, kNone, kNone},
      WeightTypeInfo{{T::Q8_0, "Q8_0", 32, 34}, "q8_0", true, true, 7, K::Q8_0, K::Q8_0x8, kNone},
      WeightTypeInfo{{T::Q8_1, "Q8_1", 32, 36}, "", true, false, 0, kNone, kNone, kNone},
      WeightTypeInfo{{T::Q2_K, "Q2_K", 256, 84}, "", true, false, 0, kNone, kNone, kNone},
      WeightTypeInfo{{T::Q3_K, "Q3_K", 256, 110}, "", true, false, 0, kNone, kNone, kNone},
      WeightTypeInfo{{T::Q4_K, "Q4_K", 256, 144}, "q4_k", true, true, 15, K::Q4_K, K::Q4_Kx8, kNone},
      WeightTypeInfo{{T::Q5_K, "Q5_K", 256, 176}, "", true, false, 0, kNone, kNone, kNone},
      WeightTypeInfo{{T::Q6_K, "Q6_K", 256, 210}, "q6_k", true, true, 18, K::Q6_K, K::Q6_Kx8, kNone},
      WeightTypeInfo{{T::Q8_K, "Q8_K", 256, 292}, "", true, false, 0, kNone, kNone, kNone},
      // Tessera's INT8: the GGUF I8 type plus per-row scales in a companion tensor (kernels/lowbit.h).
      WeightTypeInfo{{T::I8, "I8", 1, 1}, "int8", true, true, 0, K::I8, K::I8x8, kNone},
      WeightTypeInfo{{T::I16, "I16", 1, 2}, "", true, false, 0, kNone, kNone, kNone},
      WeightTypeInfo{{T::I32, "I32", 1, 4}, "", true, false, 0, kNone, kNone, kNone},
      WeightTypeInfo{{T::I64, "I64", 1, 8}, "", true, false, 0, kNone, kNone, kNone},
      WeightTypeInfo{{T::F64, "F64", 1, 8}, "", true, false, 0, kNone, kNone, kNone},
      WeightTypeInfo{{T::BF16, "BF16", 1, 2}, "bf16", true, false, 0, K::BF16, kNone, K::BF16x32},
      WeightTypeInfo{{T::FP8_E4M3, "FP8_E4M3", 1, 1}, "fp8", false, true, 0, kNone, kNone, K::FP8x32},
      // INT4 rows are padded to whole 32-value chunks: row bytes = ceil(n / 32) * 16 (see kernels/lowbit.h).
      WeightTypeInfo{{T::INT4, "INT4", 32, 16}, "int4", false, true, 0, kNone, kNone, kNone},
  };
}();

// The registry's row for `type`; null for a value outside it.
constexpr const WeightTypeInfo* find_weight_type(TensorType type) {
  for (const WeightTypeInfo& w : kWeightTypes) {
    if (w.traits.type == type) return &w;
  }
  return nullptr;
}

// The row for `type`; every TensorType value has one (weight_types.cpp checks it at compile time).
const WeightTypeInfo& weight_type_info(TensorType type);

// The one parser of the weight-type names people type (--type of make-model, bench, convert and quantize):
// cli_name, case-insensitive ("int8", "Q8_0", "fp8"). Callers that take only some types (the quantizer) check the
// row's flags.
std::optional<TensorType> weight_type_from_name(std::string_view name);

// The names weight_type_from_name takes, of the rows `offered` keeps (all of them without it), in registry order
// and ", "-separated: the one list help texts and errors print.
std::string weight_type_names(bool (*offered)(const WeightTypeInfo&) = nullptr);

}  // namespace tessera
