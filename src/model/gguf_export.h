// Writing a model file (a GGUF file, or a Hugging Face folder seen as one) out as a GGUF file, with its matrices
// optionally stored in another weight type: what `tessera convert` does.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor_type.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"

namespace tessera {

struct ExportOptions {
  // The type of every matrix (2-D tensor); empty keeps each tensor's type. F32/F16/BF16 sources can become any
  // GGUF weight type Tessera computes with (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k); a row length the type's
  // blocks do not divide falls back as fitting_weight_type() says, with a note.
  std::optional<TensorType> matrix_type;
  std::function<void(size_t done, size_t total)> progress;  // after each tensor
};

struct ExportReport {
  size_t n_tensors = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  std::vector<std::string> notes;  // fallbacks
};

// 1-D tensors (norms, biases, rope_freqs) are stored as F32, as llama.cpp's converter does (and as Tessera
// widens them at load anyway, so the file computes exactly like its source); a matrix kept in its type is copied
// byte for byte. All metadata is copied; general.file_type is set (llama.cpp's numbering) when the matrices
// share one type. Written to a temporary file and renamed, so a failure leaves nothing behind.
ExportReport export_gguf(const gguf::File& source, const std::string& path, const ExportOptions& options,
                         ThreadPool& pool);

}  // namespace tessera
