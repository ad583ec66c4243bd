// A view of one weight matrix in any supported storage type; the kernels dispatch on `type`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/tensor_type.h"

namespace tessera {

// A [n_out, n_in] matrix stored row by row (one output channel per row), as GGUF stores linear weights.
struct WeightMatrix {
  TensorType type = TensorType::F32;
  int64_t n_out = 0;
  int64_t n_in = 0;
  const uint8_t* data = nullptr;  // n_out rows of row_bytes each
  size_t row_bytes = 0;
  // Per-output-channel scales for TensorType::I8 (Tessera's INT8 format: q * scale[row]); null otherwise.
  const float* row_scales = nullptr;

  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
};

}  // namespace tessera
