// Model quantization: reads a float (F32/F16/BF16) GGUF model and writes a copy whose linear layers are stored
// in one of Tessera's weight formats (INT8, FP8, INT4) or a standard GGUF type, optionally calibrated (AWQ or
// GPTQ for INT4). Embedding and output stay as they are unless asked; norms are never quantized.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor_type.h"
#include "model/model.h"

namespace tessera::quant {

// The weight types `tessera quantize` writes, numbered as their TensorType: their names, blocks and GGUF file
// type are in the weight-type registry (core/weight_types.h, quantizer_output), which quantizer.cpp checks this
// list against.
enum class WeightFormat : uint32_t {
  Int8 = static_cast<uint32_t>(TensorType::I8),
  Fp8 = static_cast<uint32_t>(TensorType::FP8_E4M3),
  Int4 = static_cast<uint32_t>(TensorType::INT4),
  Q8_0 = static_cast<uint32_t>(TensorType::Q8_0),
  Q4_0 = static_cast<uint32_t>(TensorType::Q4_0),
  Q4_K = static_cast<uint32_t>(TensorType::Q4_K),
  Q6_K = static_cast<uint32_t>(TensorType::Q6_K),
};
constexpr TensorType tensor_type(WeightFormat f) { return static_cast<TensorType>(static_cast<uint32_t>(f)); }
enum class Method { Rtn, Awq, Gptq };

std::optional<WeightFormat> weight_format_from_name(std::string_view name);  // weight_type_from_name's, if written
std::string_view weight_format_name(WeightFormat f);
std::optional<Method> method_from_name(std::string_view name);  // "rtn", "awq", "gptq"
std::string_view method_name(Method m);

struct QuantizeOptions {
  WeightFormat format = WeightFormat::Int8;
  int64_t group_size = 32;  // INT4 only: 32 or 128 (any positive multiple of 32)
  Method method = Method::Rtn;
  std::string calibration_text;  // required for AWQ and GPTQ
  int64_t samples = 8;           // calibration windows
  int64_t sample_tokens = 256;   // tokens per window
  bool awq_clip = true;          // AWQ: after the scale search, search each group's clipping range
  bool quantize_output = false;  // also the output projection (a tied one gets its own quantized copy)
  // Called with a stage name ("calibrate", "search", "write"), progress and total.
  std::function<void(std::string_view stage, size_t done, size_t total)> progress;
};

struct TensorReport {
  std::string name;
  std::string from, to;  // type names; `to` is what the file stores (INT4 and FP8 named as such)
  std::string note;      // fallbacks, shorter last groups, AWQ choices
};

struct QuantizeReport {
  std::vector<TensorReport> tensors;  // every tensor written
  std::vector<std::string> fallbacks; // tensors stored in another type than asked, with the reason
  std::vector<std::string> notes;     // other things the user should know (short last groups, AWQ alphas)
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor data bytes
  int64_t calibration_tokens = 0;
};

// Throws tessera::Error for an unsupported source tensor type, an invalid group size, a method that needs a
// calibration text without one, an empty or too-short calibration text, or an output that cannot be written;
// no output file is left behind on failure.
QuantizeReport quantize_model(const Model& model, const std::string& out_path, const QuantizeOptions& options);

}  // namespace tessera::quant
