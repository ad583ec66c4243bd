// A view of one weight matrix in any supported storage type; the kernels dispatch on `type`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor_type.h"

namespace tessera {

// How a matrix's bytes are ordered. Rows: as the file stores them, row by row. Interleaved8: Q4_0, Q8_0, I8,
// Q4_K or Q6_K rows interleaved in groups of 8 for the kernels; Panel32: F32, F16, BF16 or FP8 rows in panels
// of 32, value by value (kernels/interleave.h). In both, row(r) does not address row r.
enum class WeightLayout : uint8_t { Rows, Interleaved8, Panel32 };

// A [n_out, n_in] matrix stored row by row (one output channel per row), as GGUF stores linear weights.
struct WeightMatrix {
  TensorType type = TensorType::F32;
  int64_t n_out = 0;
  int64_t n_in = 0;
  const uint8_t* data = nullptr;  // n_out rows of row_bytes each (n_out * row_bytes bytes in any layout)
  size_t row_bytes = 0;
  // Per-output-channel scales for TensorType::I8 (Tessera's INT8 format: q * scale[row]) and
  // TensorType::FP8_E4M3 (fp8 value * scale[row]); null otherwise.
  const float* row_scales = nullptr;
  // TensorType::I8 only, 0 = off: LLM.int8()-style outliers. Activations whose magnitude exceeds this are
  // multiplied in fp32 with the dequantized weights instead of being quantized to int8 (kernels/int8_outliers.h).
  // A load option (Model::load), not part of the file.
  float outlier_threshold = 0.0f;
  // TensorType::BF16 in WeightLayout::Panel32 only, a load option (LoadOptions::bf16_products, on for BF16 by
  // default; the loader sets it only where the level at load has AVX-512 BF16): there, activations are rounded
  // to bf16 and multiplied with vdpbf16ps (kernels/matmul_bf16_avx512.cpp, twice the fp32 FMA rate on AMD Zen 4
  // and 5), or on AMX-BF16 tiles at Isa::Amx (matmul_bf16_amx.cpp), at the cost of the activations' rounding (8
  // significant bits). Its panels are then in pair order (kernels/interleave.h), which the fp32 path also reads
  // at levels without AVX-512 BF16.
  bool bf16_products = false;
  // TensorType::INT4 only: value = scale · (q − zero) per group of group_size values along the row (the last
  // group of a row may be shorter). fp16, [n_out, n_groups] with n_groups = ceil(n_in / group_size).
  int32_t group_size = 0;
  const uint16_t* group_scales = nullptr;
  const uint16_t* group_zeros = nullptr;
  WeightLayout layout = WeightLayout::Rows;

  // Layout Rows only.
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  // Panels in BF16's pair order (kernels/interleave.h), which bf16_products implies.
  bool pair_order() const { return type == TensorType::BF16 && layout == WeightLayout::Panel32 && bf16_products; }
  int64_t n_groups() const { return group_size > 0 ? (n_in + group_size - 1) / group_size : 0; }
};

}  // namespace tessera
