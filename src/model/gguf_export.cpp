// export_gguf: per-tensor producers for the GGUF writer; conversions run row-parallel on the pool, one tensor at
// a time, so memory stays bounded by the largest tensor.
#include "model/gguf_export.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>

#include "core/error.h"
#include "formats/gguf_writer.h"
#include "kernels/quant.h"

namespace tessera {
namespace {

bool is_float(TensorType t) { return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16; }

// llama.cpp's llama_ftype numbers for files whose matrices are all of one type.
std::optional<uint32_t> file_type_of(TensorType t) {
  switch (t) {
    case TensorType::F32: return 0;
    case TensorType::F16: return 1;
    case TensorType::Q4_0: return 2;
    case TensorType::Q8_0: return 7;
    case TensorType::Q4_K: return 15;
    case TensorType::Q6_K: return 18;
    case TensorType::BF16: return 32;
    default: return std::nullopt;
  }
}

// Rows [0, n_rows) of `src` (type `from`) re-encoded as `to` into dst, in parallel.
void convert_rows(const gguf::TensorInfo& src, TensorType to, uint8_t* dst, ThreadPool& pool) {
  const int64_t n_in = int64_t(src.row_length()), n_rows = int64_t(src.n_rows());
  const uint64_t src_row = tensor_row_bytes(src.type, uint64_t(n_in)), dst_row = tensor_row_bytes(to, uint64_t(n_in));
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(64, n_rows / (8 * pool.size()) + 1));
  const int64_t n_chunks = (n_rows + chunk - 1) / chunk;
  std::atomic<int64_t> next{0};
  pool.run([&](int, int) {
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t c = next.fetch_add(1); c < n_chunks; c = next.fetch_add(1)) {
      for (int64_t r = c * chunk; r < std::min(n_rows, (c + 1) * chunk); ++r) {
        dequantize_row(src.type, src.data + uint64_t(r) * src_row, row.data(), n_in);
        quantize_row(to, row.data(), dst + uint64_t(r) * dst_row, n_in);
      }
    }
  });
}

}  // namespace

ExportReport export_gguf(const gguf::File& source, const std::string& path, const ExportOptions& options,
                         ThreadPool& pool) {
  if (options.matrix_type && (!is_supported_weight_type(*options.matrix_type) ||
                              *options.matrix_type == TensorType::I8)) {
    fail("convert: {} is not a GGUF weight type Tessera can write", tensor_type_name(*options.matrix_type));
  }
  ExportReport report;
  gguf::Writer writer(source.alignment());
  std::map<TensorType, size_t> matrix_types;
  struct Planned {
    const gguf::TensorInfo* tensor;
    TensorType type;
  };
  std::vector<Planned> plan;
  for (const gguf::TensorInfo& t : source.tensors()) {
    TensorType type = t.type;
    const bool is_matrix = t.dims.size() >= 2;
    if (!is_matrix && is_float(t.type)) {
      type = TensorType::F32;
    } else if (is_matrix && options.matrix_type && *options.matrix_type != t.type) {
      if (!is_float(t.type)) {
        fail("{}: tensor '{}' is {}; only F32, F16 and BF16 tensors are converted to another type", source.name(),
             t.name, tensor_type_name(t.type));
      }
      type = fitting_weight_type(*options.matrix_type, int64_t(t.row_length()));
      if (type != *options.matrix_type) {
        report.notes.push_back(fmt::format("{}: row length {} is not a multiple of the {} block; stored as {}", t.name,
                                           t.row_length(), tensor_type_name(*options.matrix_type),
                                           tensor_type_name(type)));
      }
    }
    if (is_matrix) matrix_types[type]++;
    plan.push_back({&t, type});
  }

  for (const auto& [key, value] : source.metadata()) {
    if (key != "general.file_type" && key != "general.quantization_version") writer.set(key, value);
  }
  if (matrix_types.size() == 1) {
    const TensorType t = matrix_types.begin()->first;
    if (auto ft = file_type_of(t)) writer.set_u32("general.file_type", *ft);
    if (!is_float(t)) writer.set_u32("general.quantization_version", 2);  // llama.cpp's current block layouts
  }

  for (const Planned& p : plan) {
    const gguf::TensorInfo& t = *p.tensor;
    const TensorType to = p.type;
    writer.add_tensor(t.name, to, t.dims, [&t, to, &pool](uint8_t* dst, uint64_t n_bytes) {
      if (to == t.type) {
        if (n_bytes != t.n_bytes) fail("tensor '{}': size mismatch", t.name);
        std::memcpy(dst, t.data, n_bytes);
      } else {
        convert_rows(t, to, dst, pool);
      }
    });
    report.bytes_in += t.n_bytes;
    report.bytes_out += tensor_row_bytes(to, t.row_length()) * t.n_rows();
  }
  report.n_tensors = plan.size();
  writer.write(path, options.progress);
  return report;
}

}  // namespace tessera
